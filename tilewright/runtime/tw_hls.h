// tilewright's stand-ins for the HLS vendor headers, for C simulation with the host compiler.
// Under a vendor tool (Vitis HLS csim or synthesis) its own <hls_stream.h> / <ap_int.h> are used.
#ifndef TW_HLS_H
#define TW_HLS_H

#if defined(__has_include)
#if __has_include(<hls_stream.h>) && __has_include(<ap_int.h>)
#define TW_VENDOR_HLS 1
#endif
#endif

#ifdef TW_VENDOR_HLS
#include <ap_int.h>
#include <hls_stream.h>
#else
#include <cstdint>
#include <deque>

// Faults a kernel hits in simulation (a read of an empty stream, data left in a stream): counted,
// never aborting, because the kernel runs inside the caller's process.
extern "C" long long tw_csim_faults;

namespace hls {
template <typename T>
class stream {
  std::deque<T> q_;

 public:
  explicit stream(const char * = "") {}
  void write(const T &v) { q_.push_back(v); }
  T read() {
    if (q_.empty()) {
      ++tw_csim_faults;
      return T();
    }
    T v = q_.front();
    q_.pop_front();
    return v;
  }
  bool empty() const { return q_.empty(); }
  ~stream() { tw_csim_faults += q_.empty() ? 0 : 1; }
};
}  // namespace hls

// A W-bit two's-complement integer: every assignment wraps to W bits, as the hardware register does.
template <int W>
class ap_int {
  int64_t v_;
  static int64_t wrap(int64_t x) {
    const uint64_t m = (W >= 64) ? ~0ull : ((1ull << W) - 1);
    uint64_t u = (uint64_t)x & m;
    if (W < 64 && (u >> (W - 1)) & 1) u |= ~m;
    return (int64_t)u;
  }

 public:
  ap_int() : v_(0) {}
  ap_int(int64_t x) : v_(wrap(x)) {}
  operator int64_t() const { return v_; }
  ap_int &operator+=(int64_t x) {
    v_ = wrap(v_ + x);
    return *this;
  }
};
#endif

#endif
