"""Structural keys: equal for structurally equal expressions, never for different ones, and stable
when the interning table starts over."""

from tilewright.ir import traverse
from tilewright.ir.dtype import float32, int32
from tilewright.ir.expr import Binary, BinOp, Const, Var
from tilewright.ir.traverse import structural_key


def _expr(x):
    return Binary(BinOp.ADD, Binary(BinOp.MUL, x, Const(4, int32), int32), Const(1, int32), int32)


def test_equal_structures_share_a_key_and_signed_zeros_do_not():
    x, y = Var("x", int32), Var("x", int32)
    assert structural_key(_expr(x)) == structural_key(_expr(x))
    assert structural_key(_expr(x)) != structural_key(_expr(y))  # vars by identity, not name
    assert structural_key(Const(0.0, float32)) != structural_key(Const(-0.0, float32))


def test_keys_stay_equal_across_a_table_reset(monkeypatch):
    x = Var("x", int32)
    old = _expr(x)
    structural_key(old)
    generation = traverse._generation
    monkeypatch.setattr(traverse, "MAX_INTERNED", 0)  # the next new key starts the table over
    structural_key(Const(12345, int32))  # a structure the table has not seen: it starts over
    monkeypatch.setattr(traverse, "MAX_INTERNED", 1 << 20)
    fresh = _expr(x)
    assert structural_key(fresh) == structural_key(old)  # the old node's cached key was recomputed
    assert traverse._generation > generation
