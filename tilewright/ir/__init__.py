"""Scalar IR shared by every layer: dtypes, expression nodes, typed constructors,
traversal and printing. Imports only `errors`. Public names: DType and the
dtype constants, Expr and its node classes, arith, traverse."""
