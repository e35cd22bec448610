"""scalelib against published inference figures: the book's own serving estimates, and NVIDIA's measured
NIM and TensorRT-LLM numbers for 70B LLaMA models on H100s (scalelib/data/inference_results.toml).

scalelib is a roofline, so on a measurement its times must come out lower and its throughputs higher
than reported; each error is held within the bound it has today, so a change that makes a prediction
worse fails here."""

import pytest

import scalelib as sl

#: |predicted / reported − 1| of each figure today, rounded up: a prediction may get better, not worse.
BOUNDS = {
    "book-v5e-4x2-step": 0.02,       # the book's own hand roofline: 17.3 ms against its 17 ms
    "book-v5e-4x4-prefill": 0.09,    # scalelib counts causal attention's FLOPs, the book only 2·P·T
    "nim-h100x2-itl": 0.43,          # the decode kernels reach ~57% of HBM bandwidth at batch 1
    "nim-h100x2-ttft": 0.55,         # prefill at ~45% of the fp8 peak, against scalelib's 100%
    "nim-h100x2-c50": 0.74,          # both of the above, plus scheduling prefills among decodes
    "trtllm-h100x4-b64": 2.02,       # an early release (0.5.0): a third of the roofline
    "trtllm-h100x4-ttft": 0.67,      # a 2048-token prefill over 4 GPUs: small matmuls, all-reduces left out
}


def test_every_published_figure_has_a_bound_and_a_source():
    results = sl.inference_results()
    assert {r.name for r in results} == set(BOUNDS)
    assert len([r for r in results if r.measured]) >= 3
    for r in results:
        assert r.url.startswith("https://") and r.source and r.date and r.config


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_prediction_error_stays_within_its_bound(name):
    assert abs(sl.prediction_error(name)) <= BOUNDS[name]


@pytest.mark.parametrize("name", [r.name for r in sl.inference_results() if r.measured])
def test_a_roofline_never_beats_a_measurement(name):
    r = next(r for r in sl.inference_results() if r.name == name)
    predicted = sl.predict_inference_result(r)
    if r.unit == "s":
        assert predicted < r.reported, "a measured time below its roofline lower bound"
    else:
        assert predicted > r.reported, "a measured throughput above its roofline upper bound"


def test_the_book_figures_are_reproduced_closely():
    assert sl.predict_inference_result("book-v5e-4x2-step") == pytest.approx(0.017, rel=0.02)
    prefill = sl.inference_results()[1]
    plain = sl.prefill_time_s("llama-3-70b", sl.tpu_slice((4, 4), "tpu-v5e"), tokens=8192, weight_dtype="int8",
                              efficiency=0.4, attention=False)
    assert plain == pytest.approx(prefill.reported, rel=0.01)      # the book's 2·P·T alone: 0.91 s


def test_llama_2_70b_is_llama_3_70b_with_its_smaller_vocabulary():
    r = next(r for r in sl.inference_results() if r.name == "trtllm-h100x4-b64")
    m = sl.model(r.model).derive("llama-2-70b", V=r.vocab)
    assert sl.params(m) == pytest.approx(69e9, rel=0.01)        # Llama 2 70B: about 69 billion parameters


def test_closed_loop_throughput_at_concurrency_one_is_one_request_after_another():
    kw = dict(weight_dtype="fp8", compute_dtype="fp8", num_chips=2)
    prefill = sl.prefill_time_s("llama-3-70b", "h100", tokens=5000, **kw)
    steps = sum(sl.generate_step_time_s("llama-3-70b", "h100", batch=1, context=5000 + g, **kw) for g in range(500))
    got = sl.closed_loop_throughput("llama-3-70b", "h100", concurrency=1, prompt_tokens=5000, output_tokens=500, **kw)
    assert got == pytest.approx(500 / (prefill + steps), rel=1e-9)


def test_closed_loop_throughput_saturates_as_concurrency_grows():
    kw = dict(prompt_tokens=128, output_tokens=128, weight_dtype="fp8", compute_dtype="fp8", num_chips=8)
    rates = [sl.closed_loop_throughput("llama-3-70b", "h100", concurrency=c, **kw) for c in (1, 16, 256, 1024)]
    assert rates == sorted(rates)
    assert rates[3] / rates[2] < 1.5 < rates[1] / rates[0]


def test_bad_input_is_refused_clearly():
    with pytest.raises(sl.UnknownNameError, match="nim-h100x2-itl"):
        sl.predict_inference_result("nim-h100x2-itk")
    with pytest.raises(sl.InvalidValueError, match="`concurrency`"):
        sl.closed_loop_throughput("llama-3-70b", "h100", num_chips=2, concurrency=0, prompt_tokens=10,
                                    output_tokens=10)
    with pytest.raises(sl.InvalidValueError, match="does not fit"):
        sl.closed_loop_throughput("llama-3-70b", "h100", num_chips=2, concurrency=4096, prompt_tokens=8192,
                                    output_tokens=512, weight_dtype="fp8")
