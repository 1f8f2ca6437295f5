"""Analyses shared by the stages (read-only questions about kernels)."""
