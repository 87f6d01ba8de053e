"""x86 dot-product intrinsics: u8 x s8 -> s32 in 4-wide groups (VNNI's shape),
s16 x s16 -> s32 pairs (`vpmaddwd`) and bf16 pairs -> f32 (`vdpbf16ps`; without AVX512-BF16 the
pair widened to fp32 and two FMAs, so bf16 models keep fp32's speed with half its bytes).

Every spelling is exact for every input of its dtypes. In particular the
AVX2 and AVX-512BW spellings of the u8 x s8 dot widen both operands to 16 bits
and use `vpmaddwd` (products and pair sums fit in 32 bits), never `vpmaddubsw`,
whose 16-bit pair sums saturate at 255 x -128 + 255 x -128 (FBGEMM#199)."""

from __future__ import annotations

from ..te import compute, placeholder, reduce_axis
from ..te import sum as te_sum
from .declare import Emitter, TensorIntrin, decl_tensor_intrin


def _dot(name: str, lanes: int, cols: int, a_dtype: str, b_dtype: str, acc: str, emitters,
         a_range=None, b_range=None) -> TensorIntrin:
    """out[i] += sum_k a[k] * b[i, k]: `lanes` outputs, `cols` products per output;
    b is `lanes` rows of `cols` contiguous values (the layout the instructions read).
    `a_range`, `b_range`: the values of `a`, `b` the spellings are exact for (None: all)."""
    a = placeholder((cols,), a_dtype, name="a")
    b = placeholder((lanes, cols), b_dtype, name="b")
    k = reduce_axis(cols, name="k")
    out = compute((lanes,), lambda i: te_sum(a[k].astype(acc) * b[i, k].astype(acc), axis=k), name="out")
    return decl_tensor_intrin(out, emitters, name, layouts=[(1,), (cols, 1), (1,)], inputs=[a, b],
                              value_ranges=[a_range, b_range])


def _block(*lines: str) -> str:
    return "{\n" + "\n".join("  " + x for x in lines) + "\n}"


class _Vec:
    """How a vector width spells its integer type, loads and stores (AVX2: 256, AVX-512: 512)."""

    def __init__(self, bits: int):
        self.t, self.p = ("__m256i", "_mm256") if bits == 256 else ("__m512i", "_mm512")
        self.bits = bits

    def load(self, x: str) -> str:
        return f"_mm256_loadu_si256((const __m256i *)({x}))" if self.bits == 256 else \
            f"_mm512_loadu_si512((const void *)({x}))"

    def store(self, x: str, y: str) -> str:
        return f"_mm256_storeu_si256((__m256i *)({x}), {y});" if self.bits == 256 else \
            f"_mm512_storeu_si512((void *)({x}), {y});"


def _accumulate(bits: int, *update: str):
    """The common frame: 4 bytes of `a` broadcast (`tw_a`), `b` loaded (`tw_b`), the
    accumulator loaded, `update` lines applied to `tw_c`, stored back."""
    v = _Vec(bits)

    def render(ops) -> str:
        a, b, c = ops
        return _block(
            f"int32_t tw_a32; memcpy(&tw_a32, {a}, 4);",
            f"const {v.t} tw_a = {v.p}_set1_epi32(tw_a32);",
            f"const {v.t} tw_b = {v.load(b)};",
            f"{v.t} tw_c = {v.load(c)};",
            *[u.format(p=v.p, t=v.t) for u in update],
            v.store(c, "tw_c"))
    return render


def _u8s8_widened(bits: int):
    """u8 x s8 through 16-bit lanes: even bytes (k = 0, 2) sign/zero-extended, then odd bytes
    (k = 1, 3), two vpmaddwd."""
    band = "_mm256_and_si256" if bits == 256 else "_mm512_and_si512"
    return _accumulate(
        bits,
        f"const {{t}} tw_ae = {band}(tw_a, {{p}}_set1_epi16(0x00ff));",
        "const {t} tw_ao = {p}_srli_epi16(tw_a, 8);",
        "const {t} tw_be = {p}_srai_epi16({p}_slli_epi16(tw_b, 8), 8);",
        "const {t} tw_bo = {p}_srai_epi16(tw_b, 8);",
        "tw_c = {p}_add_epi32(tw_c, {p}_madd_epi16(tw_be, tw_ae));",
        "tw_c = {p}_add_epi32(tw_c, {p}_madd_epi16(tw_bo, tw_ao));")


def _accumulate_ps(bits: int, *update: str):
    """The float32 frame of the bf16 emitters: the 4 bytes of `a` as `tw_a32`, `b` loaded as integer lanes
    (`tw_b`), the float32 accumulator `tw_c` loaded, `update` lines applied, stored back. Updates may name
    {v} (__m256 / __m512), {ps} (the intrinsics' prefix), {bits} and {band} (the integer AND)."""
    v, ps = ("__m256", "_mm256") if bits == 256 else ("__m512", "_mm512")
    names = {"v": v, "ps": ps, "bits": bits, "band": f"{ps}_and_si{bits}"}

    def render(ops) -> str:
        a, b, c = ops
        return _block(
            f"uint32_t tw_a32; memcpy(&tw_a32, {a}, 4);",
            f"const {v}i tw_b = {_Vec(bits).load(b)};",
            f"{v} tw_c = {ps}_loadu_ps({c});",
            *[u.format(**names) for u in update],
            f"{ps}_storeu_ps({c}, tw_c);")
    return render


def _bf16_native(bits: int):
    """vdpbf16ps on `bits`-wide registers: the pair of `a` broadcast, `lanes` pairs of `b`."""
    return _accumulate_ps(bits, "tw_c = {ps}_dpbf16_ps(tw_c, ({v}bh){ps}_set1_epi32((int32_t)tw_a32), ({v}bh)tw_b);")


def _bf16_widened(bits: int):
    """bf16 pairs as two fp32 FMAs: each bf16 value's bits are the high half of a float32 (exact), the
    pair's first value (k = 0) in the low 16 bits of each 32-bit word."""
    return _accumulate_ps(
        bits,
        "const {v} tw_a0 = {ps}_castsi{bits}_ps({ps}_set1_epi32((int32_t)(tw_a32 << 16)));",
        "const {v} tw_a1 = {ps}_castsi{bits}_ps({ps}_set1_epi32((int32_t)(tw_a32 & 0xffff0000u)));",
        "const {v} tw_b0 = {ps}_castsi{bits}_ps({ps}_slli_epi32(tw_b, 16));",
        "const {v} tw_b1 = {ps}_castsi{bits}_ps({band}(tw_b, {ps}_set1_epi32((int32_t)0xffff0000u)));",
        "tw_c = {ps}_fmadd_ps(tw_a1, tw_b1, {ps}_fmadd_ps(tw_a0, tw_b0, tw_c));")


def _vnni(bits: int) -> list[Emitter]:
    exact = "exact for all u8 x s8 inputs"
    if bits == 512:
        return [Emitter("c", ("avx512_vnni",), _accumulate(512, "tw_c = _mm512_dpbusd_epi32(tw_c, tw_a, tw_b);"),
                        "avx512vnni,avx512f", ("vpdpbusd",), note=f"AVX512-VNNI vpdpbusd (zmm), {exact}")]
    return [Emitter("c", ("avx_vnni",), _accumulate(256, "tw_c = _mm256_dpbusd_avx_epi32(tw_c, tw_a, tw_b);"),
                    "avxvnni", ("vpdpbusd",), note=f"AVX-VNNI vpdpbusd (ymm), {exact}"),
            Emitter("c", ("avx512_vnni", "avx512vl"), _accumulate(256, "tw_c = _mm256_dpbusd_epi32(tw_c, tw_a, tw_b);"),
                    "avx512vnni,avx512vl", ("vpdpbusd",), note=f"AVX512-VNNI vpdpbusd (ymm), {exact}")]


def _maddubs(bits: int, exact_for: str = "activations in [0, 127]") -> Emitter:
    """vpmaddubsw (u8 x s8 pairs summed in 16 bits, saturating) then vpmaddwd by ones: exact when
    every pair sum fits in 16 bits, which 7-bit activations (2 x 127 x 128 = 32512) or weights in
    [-64, 64] (2 x 255 x 64 = 32640, ONNX Runtime's `reduce_range`) guarantee."""
    feature, attr = ("avx2", "avx2") if bits == 256 else ("avx512bw", "avx512bw,avx512f")
    update = "tw_c = {p}_add_epi32(tw_c, {p}_madd_epi16({p}_maddubs_epi16(tw_a, tw_b), {p}_set1_epi16(1)));"
    return Emitter("c", (feature,), _accumulate(bits, update), attr, ("vpmaddubsw",),
                   note=f"vpmaddubsw + vpmaddwd: exact for {exact_for} only")


def x86_intrinsics() -> list[TensorIntrin]:
    exact = "exact for all u8 x s8 inputs"
    widened = "bf16 widened to fp32 (exact), two FMAs per pair (fp32 products, one rounding each)"
    return [
        _dot("x86.dot_8x4_u7s8", 8, 4, "uint8", "int8", "int32", [*_vnni(256), _maddubs(256)], a_range=(0, 127)),
        _dot("x86.dot_16x4_u7s8", 16, 4, "uint8", "int8", "int32", [*_vnni(512), _maddubs(512)], a_range=(0, 127)),
        _dot("x86.dot_8x4_u8s7", 8, 4, "uint8", "int8", "int32", [*_vnni(256), _maddubs(256, "weights in [-64, 64]")],
             b_range=(-64, 64)),
        _dot("x86.dot_16x4_u8s7", 16, 4, "uint8", "int8", "int32",
             [*_vnni(512), _maddubs(512, "weights in [-64, 64]")], b_range=(-64, 64)),
        _dot("x86.dot_8x4_u8s8", 8, 4, "uint8", "int8", "int32", [
            *_vnni(256),
            Emitter("c", ("avx2",), _u8s8_widened(256), "avx2", ("vpmaddwd",),
                    note=f"AVX2: widen to 16 bits, two vpmaddwd; {exact}", widens=True),
        ]),
        _dot("x86.dot_16x4_u8s8", 16, 4, "uint8", "int8", "int32", [
            *_vnni(512),
            Emitter("c", ("avx512bw",), _u8s8_widened(512), "avx512bw,avx512f", ("vpmaddwd",),
                    note=f"AVX-512BW: widen to 16 bits, two vpmaddwd; {exact}", widens=True),
        ]),
        _dot("x86.dot_8x2_s16", 8, 2, "int16", "int16", "int32", [
            Emitter("c", ("avx2",), _accumulate(256, "tw_c = _mm256_add_epi32(tw_c, _mm256_madd_epi16(tw_b, tw_a));"),
                    "avx2", ("vpmaddwd",),
                    note="AVX2 vpmaddwd; its one overflow (four -32768) wraps as int32 arithmetic does"),
        ]),
        _dot("x86.dot_16x2_bf16", 16, 2, "bfloat16", "bfloat16", "float32", [
            Emitter("c", ("avx512_bf16",), _bf16_native(512), "avx512bf16,avx512f", ("vdpbf16ps",),
                    note="AVX512-BF16 vdpbf16ps: fp32 products and sums, denormal inputs and outputs flushed"),
            Emitter("c", ("avx512f",), _bf16_widened(512), "avx512f", ("vfmadd",),
                    note=f"AVX-512F: {widened}", widens=True),
        ]),
        _dot("x86.dot_8x2_bf16", 8, 2, "bfloat16", "bfloat16", "float32", [
            Emitter("c", ("avx512_bf16", "avx512vl"), _bf16_native(256), "avx512bf16,avx512vl", ("vdpbf16ps",),
                    note="AVX512-BF16 vdpbf16ps (ymm): fp32 products and sums, denormals flushed"),
            Emitter("c", ("avx2", "fma"), _bf16_widened(256), "avx2,fma", ("vfmadd",),
                    note=f"AVX2: {widened}", widens=True),
        ]),
    ]


__all__ = ["x86_intrinsics"]
