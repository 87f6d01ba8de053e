"""Operator library."""
