"""The chip registry: published figures, sources, lookups, user chips, dtypes, and their errors."""

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import scalelib as sl
from scalelib import _specs

PUBLISHED = Path(__file__).parent / "data" / "published_chip_figures.csv"
EXPECTED = ("tpu-v3", "tpu-v4p", "tpu-v5p", "tpu-v5e", "tpu-v6e", "tpu7x",
            "v100", "a100", "h100", "h200", "b200", "gb200-nvl72")


def _published_rows():
    with PUBLISHED.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


@pytest.fixture
def clean_registry():
    """Chips registered by a test are gone after it."""
    before = dict(_specs._USER)
    yield
    _specs._USER.clear()
    _specs._USER.update(before)


def test_registry_lists_every_chip_of_the_course():
    assert sl.chips() == EXPECTED
    assert sl.chips("tpu") == EXPECTED[:6]
    assert sl.chips("gpu") == EXPECTED[6:]


def test_chip_listing_shows_the_aliases():
    text = repr(sl.chips("gpu"))
    assert "'h100' (h100-sxm, hopper)" in text and "'gb200-nvl72' (gb200, nvl72)" in text
    assert sl.chips().aliases["tpu7x"] == ("ironwood", "tpu-v7x", "v7x", "tpu-7x")


@pytest.mark.parametrize("row", _published_rows(), ids=lambda r: f"{r['chip']}.{r['field']}")
def test_every_figure_matches_its_published_value(row):
    spec = sl.chip(row["chip"])
    if row["field"] == "pod_shape":
        assert spec.pod_shape == tuple(int(n) for n in row["value"].split("x"))
    else:
        assert getattr(spec, row["field"]) == float(row["value"]), row["source"]


def test_the_published_table_covers_every_chip_and_the_main_figures():
    rows = _published_rows()
    assert {r["chip"] for r in rows} == set(EXPECTED)
    for name in EXPECTED:
        fields = {r["field"] for r in rows if r["chip"] == name}
        assert {"hbm_bytes", "hbm_bytes_per_s"} <= fields, name
    assert len(rows) >= 100


def test_a_field_source_overrides_the_chip_source():
    v5e = sl.chip("tpu-v5e")
    assert v5e.source_of("fast_mem_bytes_per_core").startswith("Google Cloud TPU documentation")
    assert v5e.source_of("bf16_flops_per_s") == v5e.source
    assert v5e.source_of("vmem_bytes_per_s") != v5e.source
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


def test_unknown_chip_lists_known_ones_and_aliases_and_suggests_the_closest():
    with pytest.raises(sl.UnknownNameError) as err:
        sl.chip("h10")
    text = str(err.value)
    assert text.startswith(
        "`chip`: unknown chip 'h10': expected one of a100, b200, gb200-nvl72, h100, h200, tpu-v3, tpu-v4p, "
        "tpu-v5e, tpu-v5p, tpu-v6e, tpu7x, v100 (also: ")
    assert "hopper" in text and text.endswith("did you mean 'h100' or 'v100'?")
    assert isinstance(err.value, KeyError)


def test_chip_rejects_a_non_name():
    with pytest.raises(sl.InvalidValueError, match=r"^`chip` must be a chip name \(e.g. 'h100'\) or a ChipSpec, got 3$"):
        sl.chip(3)


def test_unknown_family_and_field_are_named():
    with pytest.raises(sl.UnknownNameError, match="^`family`: unknown chip family 'npu': expected one of cpu, gpu, tpu"):
        sl.chips("npu")
    with pytest.raises(sl.UnknownNameError, match="unknown ChipSpec field 'hbm'"):
        sl.chip("h100").source_of("hbm")


def test_missing_rate_says_which_dtypes_the_chip_has():
    with pytest.raises(sl.InvalidValueError, match=r"^`dtype`: v100 has no published bf16 rate; it has: fp16$"):
        sl.chip("v100").peak_flops_per_s(dtype="bf16")


@pytest.mark.parametrize("spelling", ["bf16", "bfloat16", "BFloat16", np.dtype("bfloat16") if hasattr(np, "bfloat16") else "bf16"])
def test_dtype_names_accept_the_usual_spellings(spelling):
    assert sl.dtype_name(spelling) == "bf16"


def test_dtype_objects_of_numpy_and_jax():
    jnp = pytest.importorskip("jax.numpy")
    assert [sl.dtype_name(d) for d in (np.float32, jnp.bfloat16, jnp.float8_e4m3fn, np.int8, jnp.int4)] == [
        "f32", "bf16", "fp8", "int8", "int4"]
    assert sl.chip("h100").peak_flops_per_s(dtype=jnp.bfloat16) == sl.chip("h100").bf16_flops_per_s
    assert sl.bytes_per_value("float32") == 4


def test_unknown_dtype_suggests_a_spelling():
    with pytest.raises(sl.UnknownNameError, match=r"^`dtype`: unknown dtype 'bf61'.*did you mean 'bf16'"):
        sl.bytes_per_value("bf61")
    with pytest.raises(sl.UnknownNameError, match=r"^`dtype`: unknown dtype 'bool'"):
        sl.bytes_per_value(np.bool_)


def test_bandwidth_by_name_and_its_errors():
    v5e = sl.chip("tpu-v5e")
    assert v5e.bytes_per_s(bandwidth="ici") * 2 == v5e.bytes_per_s(bandwidth="ici_bidirectional")
    assert sl.chip("h100").bytes_per_s(bandwidth="nvlink") == 450e9
    with pytest.raises(sl.InvalidValueError, match=r"^`bandwidth`: h100 has no ici bandwidth; it has: hbm, nvlink$"):
        sl.chip("h100").bytes_per_s(bandwidth="ici")


def test_bytes_per_value():
    assert [sl.bytes_per_value(d) for d in ("f32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")] == [
        4, 2, 2, 1, 1, 0.5, 0.5]


# --- chips a user adds --------------------------------------------------------------

def test_a_variant_gets_its_own_name_and_says_where_it_came_from():
    fast = sl.chip("h100").derive("h100-fast-hbm", hbm_bytes_per_s=4e12)
    assert fast.name == "h100-fast-hbm" and fast.hbm_bytes_per_s == 4e12 and fast.aliases == ()
    assert "derived from h100" in fast.source
    assert sl.critical_intensity(fast) == pytest.approx(9.9e14 / 4e12)
    assert str(sl.explain(sl.critical_intensity, fast)).startswith("I_crit(h100-fast-hbm, bf16, hbm)")


def test_a_modified_copy_under_the_registered_name_is_refused():
    copy = dataclasses.replace(sl.hw.h100, hbm_bytes_per_s=4e12)
    with pytest.raises(sl.InvalidValueError, match=r"^`chip`: this ChipSpec is called 'h100' but its figures differ"):
        sl.critical_intensity(copy)


def test_register_a_chip_from_a_dict_and_find_it_by_name_and_alias(clean_registry):
    sl.register_chip({"name": "lab-npu", "family": "tpu", "source": "our lab", "aliases": ["npu1"],
                      "bf16_flops_per_s": 1e15, "hbm_bytes_per_s": 2e12})
    assert sl.critical_intensity("npu1") == 500
    assert "lab-npu" in sl.chips("tpu") and sl.chips().aliases["lab-npu"] == ("npu1",)
    with pytest.raises(sl.InvalidValueError, match=r"already registered \(lab-npu\); pass replace=True"):
        sl.register_chip({"name": "lab-npu", "family": "tpu", "source": "again"})
    sl.register_chip({"name": "lab-npu", "family": "tpu", "source": "again", "bf16_flops_per_s": 2e15,
                      "hbm_bytes_per_s": 2e12}, replace=True)
    assert sl.critical_intensity("lab-npu") == 1000


def test_built_in_chips_cannot_be_replaced(clean_registry):
    with pytest.raises(sl.InvalidValueError, match=r"^`spec`: 'hopper' is a built-in chip \(h100\); derive a variant"):
        sl.register_chip({"name": "my-gpu", "family": "gpu", "source": "x", "aliases": ["hopper"]})


def test_load_chips_from_a_toml_file(tmp_path, clean_registry):
    path = tmp_path / "mine.toml"
    path.write_text('[edge-1]\nfamily = "gpu"\nsource = "vendor sheet"\nbf16_flops_per_s = 2e14\n'
                    'hbm_bytes_per_s = 1e12\n[edge-2]\nfamily = "gpu"\nsource = "vendor sheet"\n')
    assert sl.load_chips(path) == ("edge-1", "edge-2")
    assert sl.critical_intensity("edge-1") == 200
    bad = tmp_path / "bad.toml"
    bad.write_text('[x]\nfamily = "gpu"\nsource = "s"\nhbm_bandwidth = 3\n')
    with pytest.raises(sl.UnknownNameError, match=r"^`chip 'x'`: unknown ChipSpec field 'hbm_bandwidth'.*hbm_bytes_per_s"):
        sl.load_chips(bad)
    with pytest.raises(sl.InvalidValueError, match=r"^`path`: cannot read"):
        sl.load_chips(tmp_path / "missing.toml")


@pytest.mark.parametrize("field, value, message", [
    ("bf16_flops_per_s", -1e14, "`bf16_flops_per_s` must be a positive finite number or None, got -100000000000000.0"),
    ("hbm_bytes_per_s", 0, "`hbm_bytes_per_s` must be a positive finite number or None, got 0"),
    ("hbm_bytes_per_s", float("inf"), "`hbm_bytes_per_s` must be a positive finite number or None, got inf"),
    ("hbm_bytes", True, "`hbm_bytes` must be a positive finite number or None, got True"),
    ("cores", 2.5, "`cores` must be a whole number >= 1 or None, got 2.5"),
    ("pod_shape", (4, 0), "`pod_shape` must be a sequence of whole numbers >= 1, got (4, 0)"),
])
def test_a_chipspec_checks_its_figures(field, value, message):
    with pytest.raises(sl.InvalidValueError) as err:
        sl.ChipSpec("x", "gpu", "test", **{field: value})
    assert str(err.value) == f"ChipSpec 'x': {message}"


def test_a_chipspec_needs_a_known_family_and_a_source():
    with pytest.raises(sl.UnknownNameError, match=r"^`family`: unknown chip family 'npu'"):
        sl.ChipSpec("x", "npu", "test")
    with pytest.raises(sl.InvalidValueError, match=r"^ChipSpec `source` must be a non-empty string"):
        sl.ChipSpec("x", "gpu", "")


def test_a_chip_missing_a_figure_says_which_and_how_to_add_it():
    bare = sl.ChipSpec("me", "tpu", "a test")
    with pytest.raises(sl.InvalidValueError, match=r"^a TPU slice needs `pod_shape`, and chip 'me' has none; "
                       r"give it one with chip\('me'\)\.derive"):
        sl.tpu_slice((4, 4), bare)


# --- corrected figures (issue 8) ----------------------------------------------------


def test_critical_intensity_roughly_doubled_at_hopper():
    # C / W per generation: V100 fp16 1.25e14 / 9e11, A100 3.1e14 / 2e12, H100 9.9e14 / 3.35e12,
    # H200 9.9e14 / 4.8e12, B200 2.3e15 / 8e12.
    got = {n: sl.critical_intensity(n, dtype="fp16" if n == "v100" else "bf16")
           for n in ("v100", "a100", "h100", "h200", "b200")}
    assert {n: round(v) for n, v in got.items()} == {"v100": 139, "a100": 155, "h100": 296, "h200": 206, "b200": 288}
    assert got["h100"] / got["a100"] > 1.9


def test_v5e_vmem_bandwidth_is_22_times_its_hbm():
    v5e = sl.chip("tpu-v5e")
    assert v5e.vmem_bytes_per_s == pytest.approx(22 * v5e.hbm_bytes_per_s, rel=1e-3)


def test_v100_clock_is_the_sxm2_cards_the_one_its_rate_comes_from():
    # 80 SMs x 8 tensor cores x 64 FMA per clock x 2 FLOPs x boost clock = the 125 TFLOP/s fp16 figure.
    v100 = sl.chip("v100")
    assert 80 * 8 * 64 * 2 * v100.clock_ghz_boost * 1e9 == pytest.approx(v100.fp16_flops_per_s, rel=0.005)


def test_on_chip_memories_follow_one_convention_binary_bytes():
    for name in ("v100", "a100", "h100", "h200", "b200", "gb200-nvl72", "tpu-v5e"):
        spec = sl.chip(name)
        for field in ("fast_mem_bytes_per_core", "registers_bytes_per_core", "tmem_bytes_per_core", "l2_bytes"):
            value = getattr(spec, field)
            if value is not None:
                assert value % 1024 == 0, (name, field, value)
    h100 = sl.chip("h100")
    assert h100.fast_mem_bytes_per_core == h100.registers_bytes_per_core == 256 * 1024


def test_the_nvl72_entry_says_where_its_per_gpu_figures_come_from():
    nvl = sl.chip("gb200-nvl72")
    assert "the B200's" in nvl.source
    assert "NVL72 data sheet" in nvl.source_of("scale_up_domain")
    assert nvl.bf16_flops_per_s == sl.chip("b200").bf16_flops_per_s


def test_alu_counts_match_the_published_totals():
    # H100 SXM5: 16,896 FP32 CUDA cores (NVIDIA data sheet); B200: 148 SMs x 128 = 18,944;
    # TPU v5p: 2 cores x 8 x 128 lanes x 4 ALUs = 8192 (How to Scale Your Model, ch. 12 Quiz 1).
    totals = {n: sl.chip(n).cores * sl.chip(n).vector_alus_per_core for n in ("h100", "b200", "tpu-v5p", "a100")}
    assert totals == {"h100": 16896, "b200": 18944, "tpu-v5p": 8192, "a100": 6912}


def test_a_chip_prints_its_rate_and_memory_bandwidth():
    assert repr(sl.chip("h100")) == "ChipSpec(h100, 9.9e14 FLOP/s, 3.35 TB/s memory)"
    assert repr(sl.ChipSpec("bare", "cpu", "a test")) == "ChipSpec(bare)"


def test_long_values_are_shortened_in_errors():
    with pytest.raises(sl.InvalidValueError) as err:
        sl.chip(list(range(100)))
    shown = str(err.value).split("got ", 1)[1]
    assert len(shown) == 60 and shown.endswith("...") and shown.startswith("[0, 1, 2")


def test_host_and_pod_shapes_need_the_same_axes():
    with pytest.raises(sl.InvalidValueError, match=r"`host_shape` \(2, 2, 1\) needs as many axes as `pod_shape` \(4, 4\)"):
        sl.ChipSpec("x", "tpu", "t", pod_shape=(4, 4), host_shape=(2, 2, 1))


def test_a_variant_may_take_any_new_name():
    assert sl.chip("h100").derive("a100-like-h100").name == "a100-like-h100"  # sorts before "h100"
    with pytest.raises(sl.InvalidValueError, match=r"^`name`: a variant needs a name of its own, not 'h100'$"):
        sl.chip("h100").derive("H100")


def test_per_field_sources_must_name_fields():
    with pytest.raises(sl.InvalidValueError, match=r"^ChipSpec 'x': `sources` must map field names to strings"):
        sl.ChipSpec("x", "gpu", "t", sources={"hbm": "a data sheet"})
