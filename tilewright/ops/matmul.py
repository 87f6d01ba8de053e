"""Matrix products: gemv/mv, gemm/mm, batch_matmul/bmm and torch.matmul's rules.

Every product is one compute whose body is a single sum over k of A * B. With
`out_dtype`, both operands are cast before multiplying, so int8 inputs can
accumulate in int32 (TVM's out_dtype); without it the product keeps the
operands' common dtype.
"""

from __future__ import annotations

from ..errors import DTypeError, ShapeError
from ..ir.dtype import as_dtype, promote
from ..te import cast, compute, reduce_axis
from ..te import sum as sum_of
from ..te.tensor import Tensor
from .elementwise import broadcast_index, broadcast_shapes
from .params import expect_ndim, named_axes


def _check_dtypes(op: str, a: Tensor, b: Tensor, out_dtype) -> None:
    if out_dtype is None and promote(a.dtype, b.dtype) is None:
        raise DTypeError(
            f"{op}: A '{a.name}' is {a.dtype} but B '{b.name}' is {b.dtype}; cast one side or pass out_dtype="
        )


def _product(op: str, a: Tensor, b: Tensor, trans_a: bool, trans_b: bool, name: str, out_dtype) -> Tensor:
    """out[batch..., m, n] = sum_k A[batch_a..., m, k] * B[batch_b..., k, n], where a
    1-D A has no m axis, a 1-D B no n axis, and the batch dims broadcast."""
    _check_dtypes(op, a, b, out_dtype)
    dtype = None if out_dtype is None else as_dtype(out_dtype, f"{op} out_dtype")
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    # Position of (m, k) among A's last two axes and of (k, n) among B's.
    a_mk = (1, 0) if trans_a else (0, 1)
    b_kn = (1, 0) if trans_b else (0, 1)
    k_size = a.shape[-1] if a_vec else a.shape[a.ndim - 2 + a_mk[1]]
    kb_size = b.shape[0] if b_vec else b.shape[b.ndim - 2 + b_kn[0]]
    if k_size != kb_size:
        flags = "".join(f", {f}=True" for f, on in (("transpose_a", trans_a), ("transpose_b", trans_b)) if on)
        raise ShapeError(
            f"{op}: A '{a.name}' is {list(a.shape)} but B '{b.name}' is {list(b.shape)}{flags}; "
            f"inner dimensions {k_size} and {kb_size} must match"
        )
    a_batch = () if a_vec else a.shape[:-2]
    b_batch = () if b_vec else b.shape[:-2]
    batch = broadcast_shapes([a_batch, b_batch], f"{op} batch dimensions", [a.name, b.name])
    rows = () if a_vec else (a.shape[a.ndim - 2 + a_mk[0]],)
    cols = () if b_vec else (b.shape[b.ndim - 2 + b_kn[1]],)
    k = reduce_axis(k_size, "k")

    def body(*idx):
        bi, rest = idx[: len(batch)], idx[len(batch):]
        if a_vec:
            ia = (k,)
        else:
            mk = (rest[0], k)
            ia = broadcast_index(a_batch, bi) + (mk[a_mk[0]], mk[a_mk[1]])
        if b_vec:
            ib = (k,)
        else:
            kn = (k, rest[-1])
            ib = broadcast_index(b_batch, bi) + (kn[b_kn[0]], kn[b_kn[1]])
        va, vb = a[ia], b[ib]
        if dtype is not None:
            va, vb = cast(va, dtype), cast(vb, dtype)
        return sum_of(va * vb, axis=k)

    batch_names = ["b"] if len(batch) == 1 else [f"b{d}" for d in range(len(batch))]
    names = batch_names + ["i"] * len(rows) + ["j"] * len(cols)
    return compute(batch + rows + cols, named_axes(body, names), name=name)


def gemv(a: Tensor, x: Tensor, *, name: str = "gemv", out_dtype=None) -> Tensor:
    """y[i] = sum_k A[i, k] * x[k]; A is [M, K], x is [K]."""
    expect_ndim(a, 2, "gemv", "A", "[M, K]")
    expect_ndim(x, 1, "gemv", "x", "[K]")
    return _product("gemv", a, x, False, False, name, out_dtype)


def mv(a: Tensor, x: Tensor, *, name: str = "mv", out_dtype=None) -> Tensor:
    """torch.mv: the same as gemv."""
    expect_ndim(a, 2, "mv", "A", "[M, K]")
    expect_ndim(x, 1, "mv", "x", "[K]")
    return _product("mv", a, x, False, False, name, out_dtype)


def gemm(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False, *, name: str = "gemm",
         out_dtype=None) -> Tensor:
    """C[i, j] = sum_k op(A)[i, k] * op(B)[k, j], op = transpose where asked:
    A is [M, K] ([K, M] transposed), B is [K, N] ([N, K] transposed)."""
    expect_ndim(a, 2, "gemm", "A", "[K, M]" if transpose_a else "[M, K]")
    expect_ndim(b, 2, "gemm", "B", "[N, K]" if transpose_b else "[K, N]")
    return _product("gemm", a, b, transpose_a, transpose_b, name, out_dtype)


def mm(a: Tensor, b: Tensor, *, name: str = "mm", out_dtype=None) -> Tensor:
    """torch.mm: gemm without transposes."""
    expect_ndim(a, 2, "mm", "A", "[M, K]")
    expect_ndim(b, 2, "mm", "B", "[K, N]")
    return _product("mm", a, b, False, False, name, out_dtype)


def batch_matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False, *,
                 name: str = "batch_matmul", out_dtype=None) -> Tensor:
    """C[b, i, j] = sum_k op(A)[b, i, k] * op(B)[b, k, j] for 3-D A and B; a batch
    of 1 on either side broadcasts (as in torch.matmul)."""
    expect_ndim(a, 3, "batch_matmul", "A", "[batch, K, M]" if transpose_a else "[batch, M, K]")
    expect_ndim(b, 3, "batch_matmul", "B", "[batch, N, K]" if transpose_b else "[batch, K, N]")
    return _product("batch_matmul", a, b, transpose_a, transpose_b, name, out_dtype)


def bmm(a: Tensor, b: Tensor, *, name: str = "bmm", out_dtype=None) -> Tensor:
    """torch.bmm: 3-D A [batch, M, K] and B [batch, K, N] with equal batch sizes
    (no broadcasting; use batch_matmul or matmul for that)."""
    expect_ndim(a, 3, "bmm", "A", "[batch, M, K]")
    expect_ndim(b, 3, "bmm", "B", "[batch, K, N]")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(
            f"bmm: A '{a.name}' has batch {a.shape[0]} but B '{b.name}' has batch {b.shape[0]}; "
            f"they must be equal (batch_matmul broadcasts a batch of 1)"
        )
    return _product("bmm", a, b, False, False, name, out_dtype)


def matmul(a: Tensor, b: Tensor, *, name: str = "matmul", out_dtype=None) -> Tensor:
    """torch.matmul: 1-D x 1-D is a dot product (0-d result); 2-D x 2-D a matrix
    product; a 1-D operand takes part as a row (left) or column (right) vector
    whose axis is dropped from the result; higher ranks are batches of matrices
    with broadcast batch dimensions."""
    for role, t in (("A", a), ("B", b)):
        if t.ndim == 0:
            raise ShapeError(f"matmul: {role} '{t.name}' is 0-d; both operands need at least 1 dimension")
    return _product("matmul", a, b, False, False, name, out_dtype)
