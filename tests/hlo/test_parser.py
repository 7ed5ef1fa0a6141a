"""The parser accepts what JAX and XLA print, in all its spellings."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.hlo import (
    HloParseError,
    HloUnsupportedError,
    canonical_text,
    load_module,
    parse_module,
)
from compiler.hlo.attributes import ConvDimLabels, RawAttribute, Window
from compiler.hlo.shape import ArrayShape, TupleShape
from compiler.reference import evaluate
from core.dtypes import ALL_DTYPES
from harness.hlo_fragments import ADD_F32

JAX_STYLE = """\
HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, f32[3]{0})->f32[2,3]{1,0}}

region_0.4 {
  Arg_0.5 = f32[] parameter(0)
  Arg_1.6 = f32[] parameter(1)
  ROOT add.7 = f32[] add(Arg_0.5, Arg_1.6)
}

ENTRY main.10 {
  Arg_0.1 = f32[2,3]{1,0} parameter(0)
  Arg_1.2 = f32[3]{0} parameter(1)
  broadcast.3 = f32[2,3]{1,0} broadcast(Arg_1.2), dimensions={1}
  ROOT multiply.8 = f32[2,3]{1,0} multiply(Arg_0.1, broadcast.3)
}
"""

XLA_DUMP_STYLE = """\
HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[2,3]{1,0}, f32[3]{0})->f32[2,3]{1,0}}

%fused_computation (param_0: f32[2,3], param_1: f32[3]) -> f32[2,3] {
  %param_0 = f32[2,3]{1,0} parameter(0)
  %param_1 = f32[3]{0} parameter(1)
  %broadcast.0 = f32[2,3]{1,0} broadcast(f32[3]{0} %param_1), dimensions={1}
  ROOT %multiply.0 = f32[2,3]{1,0} multiply(f32[2,3]{1,0} %param_0, f32[2,3]{1,0} %broadcast.0), metadata={op_name="jit(f)/mul" source_file="f.py" source_line=3}
}

ENTRY %main.10 (Arg_0.1: f32[2,3], Arg_1.2: f32[3]) -> f32[2,3] {
  %Arg_0.1 = f32[2,3]{1,0} parameter(0), sharding={replicated}, metadata={op_name="x"}
  %Arg_1.2 = f32[3]{0} parameter(1)
  ROOT %fusion = f32[2,3]{1,0} fusion(f32[2,3]{1,0} %Arg_0.1, f32[3]{0} %Arg_1.2), kind=kLoop, calls=%fused_computation, backend_config={"outer_dimension_partitions":["2"]}
}
"""


def test_jax_and_xla_dump_spellings_mean_the_same_values() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    expected = x * y
    for text in (JAX_STYLE, XLA_DUMP_STYLE):
        (out,) = evaluate(load_module(text), [x, y])
        assert out.tobytes() == expected.tobytes()


def test_names_with_and_without_percent_print_identically() -> None:
    with_percent = JAX_STYLE.replace("Arg_", "%Arg_").replace("broadcast.3", "%broadcast.3")
    with_percent = with_percent.replace("= f32[2,3]{1,0} broadcast", "= f32[2,3]{1,0} broadcast")
    assert canonical_text(load_module(with_percent)) == canonical_text(load_module(JAX_STYLE))


def test_without_entry_the_last_computation_is_the_entry() -> None:
    text = JAX_STYLE.replace("ENTRY main.10", "main.10")
    module = load_module(text)
    assert module.entry.name == "main.10"


def test_entry_signature_is_optional() -> None:
    text = XLA_DUMP_STYLE.replace("ENTRY %main.10 (Arg_0.1: f32[2,3], Arg_1.2: f32[3]) -> f32[2,3] {", "ENTRY %main.10 {")
    assert canonical_text(load_module(text)) == canonical_text(load_module(XLA_DUMP_STYLE))


def test_every_element_type_parses() -> None:
    for dtype in ALL_DTYPES:
        text = f"HloModule m\nENTRY e {{\n  ROOT p = {dtype.name}[2]{{0}} parameter(0)\n}}\n"
        module = load_module(text)
        assert module.entry.root.shape == ArrayShape.of(dtype, (2,))


def test_tuple_shapes_and_index_comments() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[2]{0} parameter(0)
  b = s32[] parameter(1)
  t = (f32[2]{0}, s32[], /*index=2*/(f32[2]{0}, s32[])) tuple(a, b, inner)
  inner = (f32[2]{0}, s32[]) tuple(a, b)
  ROOT g = s32[] get-tuple-element(t), index=1
}
"""
    module = load_module(text)
    t = next(i for i in module.entry.instructions if i.name == "t")
    assert isinstance(t.shape, TupleShape) and len(t.shape.elements) == 3
    assert isinstance(t.shape.elements[2], TupleShape)


def test_non_default_layout_is_kept_and_honoured_by_bitcast() -> None:
    # A column-major parameter bitcast to a row-major shape of swapped dimensions is a
    # transpose of the logical values.
    text = """HloModule m
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT b = f32[3,2]{1,0} bitcast(p)
}
"""
    module = load_module(text)
    assert module.entry.parameters[0].shape.minor_to_major == (0, 1)
    assert "f32[2,3]{0,1}" in canonical_text(module)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = evaluate(module, [x])
    assert out.tobytes() == x.T.copy().tobytes()


def test_literals() -> None:
    text = """HloModule m
ENTRY e {
  a = f32[2,2]{1,0} constant({ { 1, -inf }, { nan, -0 } })
  b = pred[3]{0} constant({true, false, true})
  c = bf16[] constant(0.1)
  d = u64[] constant(18446744073709551615)
  e = s8[2]{0} constant({-128, 127})
  f = f16[] constant(65520)
  ROOT t = (f32[2,2]{1,0}, pred[3]{0}, bf16[], u64[], s8[2]{0}, f16[]) tuple(a, b, c, d, e, f)
}
"""
    a, b, c, d, e, f = evaluate(load_module(text), [])
    assert a.view(np.uint32).tolist() == [[0x3F800000, 0xFF800000], [0x7FC00000, 0x80000000]]
    assert b.tolist() == [True, False, True]
    assert c.view(np.uint16) == 0x3DCD  # 0.1 -> f64 -> f32 -> bf16, each nearest-even
    assert d == np.uint64(2**64 - 1)
    assert e.tolist() == [-128, 127]
    assert np.isinf(f)  # 65520 rounds up past f16's largest finite value


def test_attributes_parse_into_typed_values() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[1,8,8,3]{3,2,1,0} parameter(0)
  k = f32[3,3,3,4]{3,2,1,0} parameter(1)
  ROOT c = f32[1,4,4,4]{3,2,1,0} convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f, my_flag={a=1  b="x y"}, operand_precision={highest,highest}
}
"""
    module = load_module(text)
    conv = module.entry.root
    window = conv.attrs["window"]
    assert isinstance(window, Window) and window.dims[0].stride == 2 and window.dims[1].pad_high == 1
    labels = conv.attrs["dim_labels"]
    assert isinstance(labels, ConvDimLabels) and labels.input_feature == 3 and labels.kernel_output_feature == 3
    assert conv.attrs["my_flag"] == RawAttribute('{a=1 b="x y"}')
    assert "operand_precision" in conv.ignored_attrs
    printed = canonical_text(module)
    # Unknown attributes are kept, in canonical (sorted) order; ignored ones are dropped.
    assert printed.index("dim_labels=") < printed.index("my_flag=") < printed.index("window=")
    assert "operand_precision" not in printed


def test_slice_pad_and_gather_attributes() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[10]{0} parameter(0)
  s = f32[4]{0} slice(x), slice={[1:9:2]}
  z = f32[] constant(0)
  p = f32[13]{0} pad(s, z), padding=1_2_2
  i = s32[3,1]{1,0} constant({ {0}, {5}, {12} })
  ROOT g = f32[3,2]{1,0} gather(p, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2}
}
"""
    x = np.arange(10, dtype=np.float32)
    (out,) = evaluate(load_module(text), [x])
    padded = np.array([0, 1, 0, 0, 3, 0, 0, 5, 0, 0, 7, 0, 0], dtype=np.float32)
    # gather clamps the start so the slice fits: start 12 becomes 11.
    assert out.tolist() == [padded[0:2].tolist(), padded[5:7].tolist(), padded[11:13].tolist()]


def test_xla_debug_sections_are_skipped() -> None:
    text = XLA_DUMP_STYLE.replace(
        "\n%fused", '\nFileNames\n1 "f.py"\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n%fused', 1
    )
    assert canonical_text(load_module(text)) == canonical_text(load_module(XLA_DUMP_STYLE))


@pytest.mark.parametrize(
    ("shape_text", "message"),
    [
        ("f32[2,3]{1,0:D(D,C)}", "mark D"),
        ("s8[2]{0:E(4)}", "stores elements in 4 bits"),
        ("f32[<=4]", "dynamic"),
        ("f8e8m0fnu[2]", "element type f8e8m0fnu"),
    ],
)
def test_unsupported_shapes_are_clear_errors(shape_text: str, message: str) -> None:
    with pytest.raises(HloUnsupportedError, match=message) as info:
        parse_module(f"HloModule m\nENTRY e {{\n  ROOT p = {shape_text} parameter(0)\n}}\n")
    assert info.value.location is not None and info.value.location.line == 3


def test_unknown_opcode_names_line_and_column() -> None:
    with pytest.raises(HloParseError) as info:
        parse_module("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT q = f32[] frobnicate(p)\n}\n")
    assert str(info.value).startswith("line 4, column 18:")
    assert "frobnicate" in str(info.value)


@pytest.mark.parametrize("opcode", ["custom-call", "rng", "all-reduce"])
def test_unsupported_opcodes_are_rejected_by_the_verifier(opcode: str) -> None:
    text = f"HloModule m\nENTRY e {{\n  p = f32[2]{{0}} parameter(0)\n  ROOT q = f32[2]{{0}} {opcode}(p)\n}}\n"
    with pytest.raises(HloUnsupportedError, match=opcode) as info:
        load_module(text)
    assert info.value.location is not None and info.value.location.line == 4
    assert info.value.instruction == "q"


def test_shapes_left_out_are_inferred_from_the_operands() -> None:
    """XLA's parser lets an instruction's shape be left out where the operands imply it;
    the module means the same as with the shapes written."""
    written = """HloModule m
ENTRY e {
  p0 = f32[2,3] parameter(0)
  p1 = f32[3,4] parameter(1)
  t = (f32[2,3], f32[3,4]) tuple(p0, p1)
  g = f32[2,3] get-tuple-element(t), index=0
  a = f32[2,3] add(g, g)
  ROOT d = f32[2,4] dot(a, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    left_out = written.replace("f32[2,3] get-tuple", "get-tuple").replace("f32[2,3] add", "add").replace("f32[2,4] dot", "dot")
    assert load_module(left_out).entry.root.shape == load_module(written).entry.root.shape
    assert canonical_text(load_module(left_out)) == canonical_text(load_module(written))


def test_a_shape_that_cannot_be_inferred_must_be_written() -> None:
    text = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT b = broadcast(p), dimensions={0}\n}\n"
    with pytest.raises(HloParseError, match=r"line 4, column 8: instruction %b: the shape is left out and cannot be inferred"):
        load_module(text)


def test_module_header_as_xla_writes_it() -> None:
    """`HloModule name:` and header attributes spread over lines."""
    text = """HloModule jit_f:, entry_computation_layout={
    (f32[4]{0})->
    f32[4]{0}},
    num_partitions=1

ENTRY e {
  ROOT a = f32[4] parameter(0)
}
"""
    module = load_module(text)
    assert module.name == "jit_f"


def test_instructions_written_in_place_of_operands() -> None:
    """XLA's parser takes `add(s32[] parameter(0), s32[] constant(1))`: each nested
    instruction is one of the computation's, before its user."""
    text = """HloModule m
body {
  ROOT add = s32[] add(s32[] parameter(0), s32[] constant(1))
}
cond {
  i = s32[] parameter(0)
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
ENTRY e {
  zero = s32[] constant(0)
  ROOT w = s32[] while(zero), condition=cond, body=body
}
"""
    module = load_module(text)
    body = next(c for c in module.computations if c.name == "body")
    assert [i.opcode for i in body.post_order()] == ["parameter", "constant", "add"]
    (out,) = evaluate(module, [])
    assert int(out) == 5


def test_text_as_xla_writes_it_in_its_own_tests() -> None:
    """Instructions wrapped over lines and several on one line, nested operands without a
    shape, index comments inside literals, one value for an array (its first element; the
    rest zero, as XLA reads it), a negative unsigned literal (modulo 2^bits) and a rank-0
    reduce-window without a window: XLA's parser takes all of them."""
    text = "HloModule m\n\n" + ADD_F32 + """
ENTRY e {
  p = f32[2]{0} parameter(0),
    sharding={devices=[2]0,1
    } q = f32[2]{0} parameter(1)
  c = f32[2,0,3] constant({ { /*i0=0*/ }, { /*i0=1*/ } })
  one = f32[2,2] constant(1.5)
  u = u32[2] constant({-1, 7})
  z = f32[] constant(0)
  rw = f32[] reduce-window(z, z), to_apply=add
  ROOT r = f32[2] add(p, multiply(q, q))
}
"""
    module = load_module(text)
    by_name = {i.name: i for i in module.entry.instructions}
    assert np.asarray(by_name["one"].literal).tolist() == [[1.5, 0.0], [0.0, 0.0]]
    assert np.asarray(by_name["u"].literal).tolist() == [2**32 - 1, 7]
    assert by_name["c"].array_shape.dims == (2, 0, 3)
    (out,) = evaluate(module, [np.array([1, 2], np.float32), np.array([3, 4], np.float32)])
    assert out.tolist() == [10.0, 18.0]


def test_attribute_values_over_lines_with_braces_of_their_own() -> None:
    """A JSON backend_config whose closing braces stand alone on their lines, and a wrapped
    value whose next line reads `key={...`: both belong to the instruction (XLA's own tests
    write them), while a lone `}` indented no deeper than the instruction still closes the
    computation."""
    text = """HloModule m

ENTRY e {
  p = f32[2]{0} parameter(0)
  n = f32[2]{0} negate(p),
    backend_config={
      "outer":{
        "kind":"x"
      }
    }, frontend_attributes={
      key={"v"}
    }
  ROOT r = f32[2]{0} add(n, p)
}
"""
    module = load_module(text)
    (out,) = evaluate(module, [np.array([1, 2], np.float32)])
    assert out.tolist() == [0.0, 0.0]


def test_layout_marks_that_keep_values_are_read_and_dropped() -> None:
    """Tiles, memory spaces, splits and element sizes say where elements sit in memory: the
    module computes the same values as without them; only a bitcast (which reinterprets
    memory) of a tiled shape is refused."""
    plain = "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  t = f32[3,2]{1,0} transpose(p), dimensions={1,0}\n  ROOT c = f32[3,2]{1,0} copy(t)\n}\n"
    marked = plain.replace("{0,1}", "{0,1:T(8,128)(2,1)S(1)}").replace("t = f32[3,2]{1,0}", "t = f32[3,2]{1,0:E(32)SC(0:2)}")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert canonical_text(load_module(marked)) == canonical_text(load_module(plain))
    assert evaluate(load_module(marked), [x])[0].tolist() == x.T.tolist()
    with pytest.raises(HloUnsupportedError, match="bitcast of a tiled"):
        load_module(marked.replace("transpose(p), dimensions={1,0}", "bitcast(p)"))


def test_a_computations_execution_thread_is_read_and_changes_nothing() -> None:
    text = "HloModule m\nneg {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}, execution_thread=\"parallel_thread\"\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT c = f32[2] call(x), to_apply=neg\n}\n"
    (out,) = evaluate(load_module(text), [np.array([1, -2], np.float32)])
    assert out.tolist() == [-1.0, 2.0]
