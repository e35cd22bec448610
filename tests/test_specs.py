"""The chip registry: every chip of the reference table, sources, lookups and their errors."""

import csv
import dataclasses
from pathlib import Path

import pytest

import scalelib as sl

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "hardware.csv"
EXPECTED = ("tpu-v3", "tpu-v4p", "tpu-v5p", "tpu-v5e", "tpu-v6e", "tpu7x",
            "v100", "a100", "h100", "h200", "b200", "gb200-nvl72")


def test_registry_lists_every_chip_of_the_course():
    assert sl.chips() == EXPECTED
    assert sl.chips("tpu") == EXPECTED[:6]
    assert sl.chips("gpu") == EXPECTED[6:]


# Published figures, typed here independently of scalelib/data/chips.toml.
@pytest.mark.parametrize(
    "name, field, value",
    [
        ("tpu-v5e", "bf16_flops_per_s", 1.97e14),  # Google Cloud TPU v5e docs: 197 TFLOP/s bf16
        ("tpu-v5e", "hbm_bytes_per_s", 8.2e11),  # 819 GB/s
        ("tpu-v5p", "bf16_flops_per_s", 4.59e14),  # Google Cloud TPU v5p docs: 459 TFLOP/s
        ("tpu-v5p", "hbm_bytes", 95e9),  # 95 GB HBM (the book rounds to 96e9)
        ("h100", "bf16_flops_per_s", 9.89e14),  # NVIDIA H100 SXM: 989 TFLOP/s dense bf16
        ("h100", "hbm_bytes_per_s", 3.35e12),  # 3.35 TB/s
        ("a100", "bf16_flops_per_s", 3.12e14),  # NVIDIA A100: 312 TFLOP/s bf16
        ("b200", "hbm_bytes", 192e9),
        ("v100", "fp16_flops_per_s", 1.25e14),  # NVIDIA V100 SXM2: 125 TFLOP/s fp16 tensor
    ],
)
def test_specs_match_published_figures(name, field, value):
    assert getattr(sl.chip(name), field) == pytest.approx(value, rel=0.015)


@pytest.mark.skipif(not REFERENCE.exists(), reason="the shared reference table is not beside the checkout")
def test_specs_agree_with_the_shared_reference_table():
    columns = {
        "bf16_flops_per_s": "bf16_flops_per_s", "int8_ops_per_s": "int8_ops_per_s",
        "fp8_flops_per_s": "fp8_flops_per_s", "fp4_flops_per_s": "fp4_flops_per_s",
        "hbm_bytes": "hbm_bytes", "hbm_bytes_per_s": "hbm_bytes_per_s",
        "link_bytes_per_s_one_way": "ici_link_bytes_per_s_one_way",
        "link_bytes_per_s_bidirectional": "ici_link_bytes_per_s_bidirectional",
        "links_per_chip": "ici_links_per_chip", "dcn_bytes_per_s_per_chip": "dcn_bytes_per_s_per_chip",
        "pcie_bytes_per_s": "pcie_bytes_per_s", "num_cores_or_sms": "cores", "l2_bytes": "l2_bytes",
        "scale_up_bytes_per_s_per_gpu": "scale_up_bytes_per_s_per_gpu", "scale_up_domain": "scale_up_domain",
        "scale_out_bytes_per_s_per_node": "scale_out_bytes_per_s_per_node",
    }
    with REFERENCE.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == list(EXPECTED)
    for row in rows:
        spec = sl.chip(row["name"])
        for column, field in columns.items():
            if row[column]:
                assert getattr(spec, field) == float(row[column]), (row["name"], field)
            elif getattr(spec, field) is not None:
                # A figure the shared table lacks must name a source of its own.
                assert field in spec.sources, (row["name"], field)
        pod = tuple(int(n) for n in row["pod_shape"].split("x")) if row["pod_shape"] else None
        assert spec.pod_shape == pod


def test_every_chip_names_a_source_for_every_figure():
    for name in sl.chips():
        spec = sl.chip(name)
        for field in dataclasses.fields(spec):
            assert spec.source_of(field.name)
    assert "V100 data sheet" in sl.chip("v100").source_of("fp16_flops_per_s")


def test_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        sl.chip("h100").hbm_bytes = 1


def test_lookup_accepts_aliases_case_and_specs():
    assert sl.chip("TPU-V5E") is sl.chip("v5e") is sl.chip("tpu_v5e")
    assert sl.chip("ironwood").name == "tpu7x"
    spec = sl.chip("h100")
    assert sl.chip(spec) is spec
    assert sl.hw.gb200_nvl72 is sl.chip("gb200-nvl72")
    assert "tpu_v5e" in dir(sl.hw)


def test_unknown_chip_lists_known_ones_and_suggests_the_closest():
    with pytest.raises(sl.UnknownNameError) as err:
        sl.chip("h10")
    assert str(err.value) == (
        "unknown chip 'h10': expected one of a100, b200, gb200-nvl72, h100, h200, tpu-v3, tpu-v4p, "
        "tpu-v5e, tpu-v5p, tpu-v6e, tpu7x, v100; did you mean 'h100' or 'v100'?"
    )
    assert isinstance(err.value, KeyError)


def test_chip_rejects_a_non_name():
    with pytest.raises(sl.InvalidValueError, match=r"`chip` must be a chip name or a ChipSpec, got 3"):
        sl.chip(3)


def test_unknown_family_and_field_are_named():
    with pytest.raises(sl.UnknownNameError, match="unknown chip family 'npu': expected one of gpu, tpu"):
        sl.chips("npu")
    with pytest.raises(sl.UnknownNameError, match="unknown ChipSpec field 'hbm'"):
        sl.chip("h100").source_of("hbm")


def test_missing_rate_says_which_dtypes_the_chip_has():
    with pytest.raises(sl.InvalidValueError, match=r"^v100 has no published bf16 rate; it has: fp16$"):
        sl.chip("v100").flops_per_s("bf16")
    with pytest.raises(sl.UnknownNameError, match=r"unknown dtype 'bfloat16'.*did you mean 'bf16'"):
        sl.chip("h100").flops_per_s("bfloat16")


def test_bandwidth_by_name_and_its_errors():
    v5e = sl.chip("tpu-v5e")
    assert v5e.bandwidth("ici") * 2 == v5e.bandwidth("ici_bidirectional")
    assert sl.chip("h100").bandwidth("nvlink") == 450e9
    with pytest.raises(sl.InvalidValueError, match=r"^h100 has no ici bandwidth; it has: hbm, nvlink$"):
        sl.chip("h100").bandwidth("ici")


def test_bytes_per_value():
    assert [sl.bytes_per_value(d) for d in ("f32", "bf16", "int8", "int4")] == [4, 2, 1, 0.5]
