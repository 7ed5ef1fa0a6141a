"""Errors about an instruction name the user's source where the HLO's metadata carries it:
JAX's op_name and file:line, inline or through the debug tables after the HloModule line.
None of it is hashed."""

from __future__ import annotations

import pytest

from compiler.hlo.errors import HloError
from compiler.program import load_program

TABLES = """FileNames
1 "<string>"
2 "model.py"

FunctionNames
1 "<module>"
2 "block"

FileLocations
1 {file_name_id=1 function_name_id=1 line=5 end_line=5 column=4 end_column=37}
2 {file_name_id=2 function_name_id=2 line=41 end_line=41 column=26 end_column=31}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
"""


def _module(tables: str, metadata: str, root_shape: str = "f32[2,2]") -> str:
    return (
        "HloModule jit_block, entry_computation_layout={(f32[2,2]{1,0})->f32[2,2]{1,0}}\n\n"
        f"{tables}\n"
        "ENTRY main.1 {\n"
        '  x.1 = f32[2,2]{1,0} parameter(0), metadata={op_name="x"}\n'
        f"  ROOT tanh.1 = {root_shape}{{1,0}} tanh(x.1){metadata}\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("tables", "metadata", "named"),
    [
        (TABLES, ', metadata={op_name="jit(block)/tanh" stack_frame_id=2}', "(jit(block)/tanh at model.py:41 (block))"),
        ("", ', metadata={op_name="jit(block)/tanh" source_file="model.py" source_line=12}', "(jit(block)/tanh at model.py:12)"),
        ("", ', metadata={op_name="jit(block)/tanh"}', "(jit(block)/tanh)"),
        (TABLES, ', metadata={stack_frame_id=9}', None),  # a frame the tables do not have
        ("", "", None),
    ],
)
def test_a_shape_error_names_the_users_source(tables: str, metadata: str, named: str | None) -> None:
    with pytest.raises(HloError) as raised:
        load_program(_module(tables, metadata, root_shape="f32[2,3]"))
    message = str(raised.value)
    assert "instruction %tanh.1" in message and "does not match the shape f32[2,2]" in message
    if named is None:
        assert "instruction %tanh.1: declared shape" in message
    else:
        assert f"instruction %tanh.1 {named}: declared shape" in message


def test_an_unsupported_opcode_names_it_too() -> None:
    text = _module(TABLES, "").replace("tanh(x.1)", 'custom-call(x.1), custom_call_target="lapack_sgetrf", metadata={op_name="jit(block)/lu" stack_frame_id=2}')
    with pytest.raises(HloError, match=r"instruction %tanh\.1 \(jit\(block\)/lu at model\.py:41 \(block\)\): opcode custom-call is not supported"):
        load_program(text)


def test_the_source_is_never_hashed() -> None:
    with_info = load_program(_module(TABLES, ', metadata={op_name="jit(block)/tanh" stack_frame_id=2}'))
    without = load_program(_module("", ""))
    assert with_info.hlo_hash == without.hlo_hash
    assert with_info.source_hash != without.source_hash


def test_parameters_are_named_by_their_pytree_path_where_jax_says_else_by_their_name() -> None:
    text = (
        "HloModule jit_f, entry_computation_layout={(f32[4]{0}, f32[3,4]{1,0}, f32[2,3]{1,0})->f32[2,4]{1,0}}\n\n"
        "ENTRY main.1 {\n"
        "  params__b__.1 = f32[4]{0} parameter(0), metadata={op_name=\"params[\\'b\\']\"}\n"
        "  params__w__.1 = f32[3,4]{1,0} parameter(1), metadata={op_name=\"params[\\'w\\']\"}\n"
        "  x.1 = f32[2,3]{1,0} parameter(2)\n"
        "  dot.1 = f32[2,4]{1,0} dot(x.1, params__w__.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  broadcast.1 = f32[2,4]{1,0} broadcast(params__b__.1), dimensions={1}\n"
        "  ROOT add.1 = f32[2,4]{1,0} add(dot.1, broadcast.1)\n"
        "}\n"
    )
    program = load_program(text)
    assert program.parameter_names == ["params['b']", "params['w']", "x.1"]


SHARED_CALLEE = """HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

relu.1 {
  x.2 = f32[4]{0} parameter(0)
  zero.3 = f32[] constant(0)
  zeros.4 = f32[4]{0} broadcast(zero.3), dimensions={}
  ROOT max.5 = f32[4]{0} maximum(x.2, zeros.4), metadata={op_name="max"}
}

ENTRY main.6 {
  x.7 = f32[4]{0} parameter(0), metadata={op_name="x"}
  first.8 = f32[4]{0} call(x.7), to_apply=relu.1, metadata={op_name="jit(f)/block_0/jit(relu)" source_file="model.py" source_line=3}
  scaled.9 = f32[4]{0} multiply(first.8, first.8), metadata={op_name="jit(f)/block_1/mul" source_file="model.py" source_line=4}
  ROOT second.10 = f32[4]{0} call(scaled.9), to_apply=relu.1, metadata={op_name="jit(f)/block_1/jit(relu)" source_file="model.py" source_line=5}
}
"""


def test_a_computation_called_from_two_layers_is_named_under_each_call_once_inlined() -> None:
    """JAX's `jit(relu)` in every layer is one computation: each inlined copy is named under
    its own call (block_0's or block_1's op name, at its line), not all under the first."""
    from compiler.config import load_config
    from compiler.driver import optimized_plan

    program = load_program(SHARED_CALLEE)
    module, _ = optimized_plan(program, load_config())
    users = sorted(i.location.user for c in module.computations for i in c.instructions if i.location is not None and i.location.user and "relu" in i.location.user and "max" in i.location.user)
    assert "jit(f)/block_0/jit(relu)/max at model.py:3" in users and "jit(f)/block_1/jit(relu)/max at model.py:5" in users, users
    # Before inlining the callee's own instructions say only what they are, relative to a call.
    [callee] = [c for c in program.module.computations if c.name == "relu.1"]
    assert callee.root.location is not None and callee.root.location.relative and callee.root.location.user == "max"


@pytest.mark.parametrize(
    ("target", "said"),
    [("lapack_sgetrf_ffi", "LAPACK's LU factorization with partial pivoting, which JAX emits for jnp.linalg.inv"),
     ("lapack_dpotrf_ffi", "LAPACK's Cholesky factorization (jnp.linalg.cholesky"),
     ("lapack_cgesdd_ffi", "LAPACK's singular value decomposition (jnp.linalg.svd"),
     ("lapack_ssyevd", "LAPACK's symmetric eigendecomposition (jnp.linalg.eigh"),
     ("lapack_sfoo_ffi", "custom call lapack_sfoo_ffi runs opaque host code"),
     ("my_kernel", "custom call my_kernel runs opaque host code")],
)  # fmt: skip
def test_a_custom_call_is_refused_by_its_target_in_the_users_terms(target: str, said: str) -> None:
    """JAX lowers linear algebra on CPU to LAPACK custom calls: the refusal names the target,
    what the routine computes and the JAX functions that emit it, at the user's line."""
    text = _module(TABLES, "").replace("tanh(x.1)", f'custom-call(x.1), custom_call_target="{target}", metadata={{op_name="jit(block)/lu" stack_frame_id=2}}')
    with pytest.raises(HloError) as refused:
        load_program(text)
    assert f"custom call {target}" in str(refused.value) and said in str(refused.value) and "at model.py:41" in str(refused.value), str(refused.value)


def test_debug_info_is_left_out_but_the_parameters_names_and_nothing_hashed_changes() -> None:
    from compiler.hlo.source_info import without_debug_info

    text = _module(TABLES, ', metadata={op_name="jit(block)/tanh" stack_frame_id=2}')
    stripped = without_debug_info(text)
    assert not any(section in stripped for section in ("FileNames", "StackFrames", "model.py", "stack_frame_id", "jit(block)/tanh"))
    assert 'parameter(0), metadata={op_name="x"}' in stripped
    assert load_program(stripped).hlo_hash == load_program(text).hlo_hash
    assert load_program(stripped).parameter_names == ["x"]
