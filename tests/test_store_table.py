"""The store's tensor table is untrusted input even when its digest matches.

The digest is plain SHA-256, so anyone can sign a table they wrote. These properties build
tables that are malformed but correctly signed, and require :class:`CorruptEntry` for every
one of them; well-formed entries must still round-trip bit for bit.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors.torch")

from servelab.testing.core import thoroughness  # noqa: E402
from servelab.weights.fileformat import (  # noqa: E402
    DIGEST_KEY,
    CorruptEntry,
    _digest,
    decode,
    encode,
    split,
    supported_dtypes,
)

DTYPES = supported_dtypes()
CODES = sorted(DTYPES)
FIELDS = ("dtype", "shape", "data_offsets")


def sign(table: dict[str, Any], body: bytes, *, extra: str = "") -> bytes:
    """A safetensors buffer whose digest matches ``table`` and ``body``, as anyone can make.

    ``extra`` is raw JSON text appended inside the header object (a repeated name)."""
    header = {"__metadata__": {DIGEST_KEY: _digest(table, memoryview(body))}, **table}
    text = json.dumps(header, separators=(",", ":"))
    if extra:
        text = text[:-1] + "," + extra + "}"
    blob = text.encode()
    blob += b" " * (-len(blob) % 8)
    return len(blob).to_bytes(8, "little") + blob + body


def as_bytes(t: torch.Tensor) -> bytes:
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).tolist())


Spec = dict[str, tuple[str, list[int], bytes]]  # name -> (dtype code, torch shape, bytes)


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    """One to four tensors of any dtype the store saves, with every bit pattern (as specs:
    Hypothesis prints them, which it cannot do for every tensor dtype)."""
    names = draw(
        st.lists(
            st.text(max_size=6).filter(lambda n: n != "__metadata__"),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    out = {}
    for name in names:
        code = draw(st.sampled_from(CODES))
        width = DTYPES[code].itemsize
        shape = draw(st.lists(st.integers(0, 3), min_size=code == "F4", max_size=3))
        numel = 1
        for d in shape:
            numel *= d
        raw = draw(st.binary(min_size=numel * width, max_size=numel * width))
        if code == "BOOL":
            raw = bytes(b & 1 for b in raw)
        out[name] = (code, shape, raw)
    return out


def build(spec: Spec) -> dict[str, torch.Tensor]:
    return {
        name: torch.tensor(list(raw), dtype=torch.uint8).view(DTYPES[code]).view(shape)
        for name, (code, shape, raw) in spec.items()
    }


@given(specs())
def test_well_formed_entries_round_trip_bit_for_bit(spec: Spec) -> None:
    ts = build(spec)
    back = decode(encode(ts))
    assert sorted(back) == sorted(ts)
    for name, t in ts.items():
        assert back[name].dtype == t.dtype and back[name].shape == t.shape, name
        assert as_bytes(back[name]) == as_bytes(t), name


NOT_A_COUNT = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=2**63),
    st.floats(allow_nan=False),  # 2.0 included: JSON's 2.0 is a float, not a count
    st.booleans(),
    st.text(max_size=4),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2),
)
NOT_A_DTYPE = st.one_of(
    st.text(max_size=8).filter(lambda c: c not in DTYPES),
    st.sampled_from([c.lower() for c in CODES] + ["F128", "float32", "Float32"]),
    st.integers(),
    st.none(),
    st.booleans(),
    st.lists(st.sampled_from(CODES), max_size=2),
)
NOT_AN_ENTRY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=6),
    st.lists(st.integers(0, 9), max_size=3),
)
MUTATIONS = [
    "negative dim",
    "dim not a count",
    "shape not a list",
    "dtype unknown",
    "dtype of another width",
    "offset not a count",
    "offsets not a pair",
    "offsets past the data",
    "offsets reversed",
    "range moved",
    "data cut short",
    "data with a tail",
    "entry not an object",
    "field missing",
    "field added",
    "shape too large to index",
    "empty table",
    "name repeated",
]


@st.composite
def malformed(draw: st.DrawFn, kind: str) -> bytes:
    """A well-formed entry with one defect of ``kind``, signed after the defect was made."""
    header, body_view = split(encode(build(draw(specs()))))
    header.pop("__metadata__")
    table: dict[str, Any] = header
    body = bytes(body_view)
    name = draw(st.sampled_from(sorted(table)))
    entry = table[name]
    shape, offsets = entry["shape"], entry["data_offsets"]
    sized = [n for n in sorted(table) if table[n]["data_offsets"][1] > table[n]["data_offsets"][0]]
    extra = ""
    if kind == "negative dim":
        i = draw(st.integers(0, len(shape)))
        shape[i:i] = [draw(st.integers(max_value=-1))]
    elif kind == "dim not a count":
        i = draw(st.integers(0, max(0, len(shape) - 1)))
        shape[i : i + 1] = [draw(NOT_A_COUNT.filter(lambda x: not isinstance(x, list)))]
    elif kind == "shape not a list":
        entry["shape"] = draw(
            st.one_of(
                st.just("".join(map(str, shape)) or "12"),  # "12" is not (1, 2)
                st.integers(0, 9),
                st.none(),
                st.dictionaries(st.text(max_size=2), st.integers(0, 3), max_size=2),
            )
        )
    elif kind == "dtype unknown":
        entry["dtype"] = draw(NOT_A_DTYPE)
    elif kind == "dtype of another width":
        name = draw(st.sampled_from(sized)) if sized else name
        entry = table[name]
        width = DTYPES[entry["dtype"]].itemsize
        if not sized:  # nothing has bytes: give it some it cannot account for
            entry["data_offsets"] = [0, 1]
            body = b"\x00"
        else:
            entry["dtype"] = draw(
                st.sampled_from([c for c in CODES if DTYPES[c].itemsize != width])
            )
    elif kind == "offset not a count":
        offsets[draw(st.integers(0, 1))] = draw(NOT_A_COUNT)
    elif kind == "offsets not a pair":
        entry["data_offsets"] = draw(
            st.one_of(
                st.lists(st.integers(0, len(body)), max_size=1),
                st.lists(st.integers(0, len(body)), min_size=3, max_size=4),
                st.just(f"{offsets[0]},{offsets[1]}"),
                st.none(),
            )
        )
    elif kind == "offsets past the data":
        end = len(body) + draw(st.integers(1, 2**70))  # a zero-size range may move, not leave
        entry["data_offsets"] = [end - (offsets[1] - offsets[0]), end]
    elif kind == "offsets reversed":
        entry["data_offsets"] = [offsets[1] + 1 + draw(st.integers(0, 3)), offsets[0]]
    elif kind == "range moved":
        name = draw(st.sampled_from(sized)) if sized else name
        entry = table[name]
        start, end = entry["data_offsets"]
        if not sized:
            entry["data_offsets"] = [start + 1, end + 1]
        else:
            moves = [d for d in range(-start, len(body) - end + 1) if d]
            if not moves:  # it fills the data alone: move it past the end
                moves = [1]
            d = draw(st.sampled_from(moves))
            entry["data_offsets"] = [start + d, end + d]
    elif kind == "data cut short":
        if body:
            body = body[: draw(st.integers(0, len(body) - 1))]
        else:
            entry["data_offsets"] = [0, 1]
    elif kind == "data with a tail":
        body += draw(st.binary(min_size=1, max_size=9))
    elif kind == "entry not an object":
        table[name] = draw(NOT_AN_ENTRY)
    elif kind == "field missing":
        del entry[draw(st.sampled_from(FIELDS))]
    elif kind == "field added":
        entry[draw(st.text(max_size=4).filter(lambda f: f not in FIELDS))] = draw(NOT_AN_ENTRY)
    elif kind == "shape too large to index":
        big = draw(st.integers(2**32, 2**62))
        entry["shape"] = [0, big, big]
        entry["data_offsets"] = [offsets[0], offsets[0]]
        body = body[: offsets[0]] + body[offsets[1] :]
        for other in table.values():  # keep the rest tiling the data
            if other is not entry and other["data_offsets"][0] >= offsets[1]:
                n = offsets[1] - offsets[0]
                other["data_offsets"] = [x - n for x in other["data_offsets"]]
    elif kind == "empty table":
        table.clear()
        body = b""
    else:  # "name repeated": the digest covers what a JSON reader keeps, the last copy
        extra = json.dumps(name) + ":" + json.dumps(entry, separators=(",", ":"))
    return sign(table, body, extra=extra)


@pytest.mark.parametrize("kind", MUTATIONS)
@settings(max_examples=10 * thoroughness())  # per kind: 180 in all, 1800 in CI
@given(data=st.data())
def test_a_malformed_table_is_a_corrupt_entry_even_when_signed(
    kind: str, data: st.DataObject
) -> None:
    blob = data.draw(malformed(kind), label="signed buffer")
    with pytest.raises(CorruptEntry):
        decode(blob)


@pytest.mark.parametrize(
    ("shape", "offsets"),
    [
        ([-2, -3], [0, 24]),  # negative dimensions: torch raised a bare RuntimeError
        ("12", [0, 8]),  # a string: it was read as (1, 2)
        ([2.7], [0, 8]),  # a float: it was read as 2
        ([True, 2], [0, 8]),  # a bool: it was read as 1
        ([2], ["0", "8"]),  # offsets as strings: they were read as numbers
    ],
)
def test_the_reported_malformed_tables_are_corrupt_entries(shape: object, offsets: object) -> None:
    table = {"w": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}
    with pytest.raises(CorruptEntry, match="'w'"):
        decode(sign(table, bytes(24 if shape == [-2, -3] else 8)))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
ENTRY_LIKE = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(CODES) | JSON,
        "shape": st.lists(st.integers(-1, 4), max_size=3) | JSON,
        "data_offsets": st.lists(st.integers(-1, 40), min_size=2, max_size=2) | JSON,
    }
)


@given(
    st.dictionaries(st.text(max_size=3), ENTRY_LIKE | JSON, max_size=4),
    st.binary(max_size=40),
)
def test_a_signed_table_either_decodes_exactly_or_is_a_corrupt_entry(
    table: dict[str, Any], body: bytes
) -> None:
    """Whatever the signed table says, decode raises nothing but CorruptEntry, and what it does
    return is exactly the bytes the table names, in the shape it names."""
    table.pop("__metadata__", None)
    try:
        out = decode(sign(table, body))
    except CorruptEntry:
        return
    assert sorted(out) == sorted(table)
    for name, t in out.items():
        start, end = table[name]["data_offsets"]
        assert as_bytes(t) == body[start:end]
        assert t.dtype == DTYPES[table[name]["dtype"]]
