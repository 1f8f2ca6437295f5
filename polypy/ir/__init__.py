"""The polypy IR: nodes, types, traversal, text form and verifier."""
from polypy.ir.nodes import *  # noqa: F401,F403
from polypy.ir.nodes import (
    Assign, AtomicRMW, Barrier, Binary, BlockDim, BlockIdx, Break, Buffer, Call, Cast, Const, Continue,
    Decl, Expr, For, GpuIndex, GridDim, If, Kernel, Load, Module, Node, Param, Return, Select, Shuffle,
    SourceParam, Stmt, Store, ThreadIdx, Unary, Var, Vote, While,
)
from polypy.ir.parser import parse_kernel, parse_module
from polypy.ir.printer import format_expr, print_ir, print_kernel, print_module
from polypy.ir.types import (
    BOOL, F32, F64, I8, I16, I32, I64, SCALAR_TYPES, U8, U16, U32, U64, PointerType, ScalarType,
)
from polypy.ir.verifier import verify_kernel, verify_module
from polypy.ir.versions import (
    ArraysApart, BlockShapeIs, EnoughCoarseBlocks, Facts, Guard, KernelVersions, print_versions,
)
from polypy.ir.visitor import Mutator, Visitor, child_fields, iter_children, substitute, walk, walk_block

__all__ = [
    "Assign", "AtomicRMW", "Barrier", "Binary", "BlockDim", "BlockIdx", "Break", "Buffer", "Call", "Cast",
    "Const", "Continue", "Decl", "Expr", "For", "GpuIndex", "GridDim", "If", "Kernel", "Load", "Module",
    "Node", "Param", "Return", "Select", "Shuffle", "SourceParam", "Stmt", "Store", "ThreadIdx", "Unary",
    "Var", "Vote", "While",
    "parse_kernel", "parse_module", "format_expr", "print_ir", "print_kernel", "print_module",
    "BOOL", "F32", "F64", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "SCALAR_TYPES",
    "PointerType", "ScalarType", "verify_kernel", "verify_module",
    "ArraysApart", "BlockShapeIs", "EnoughCoarseBlocks", "Facts", "Guard", "KernelVersions", "print_versions",
    "Mutator", "Visitor", "child_fields", "iter_children", "substitute", "walk", "walk_block",
]
