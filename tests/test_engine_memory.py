"""The engine's memory model (engine/memory.py): the terms the issue's arithmetic names are counted per
attention implementation, the per-row path has no L x L term, and groups are sized by it on a GPU. The
model is checked against measured peaks by eval/prefill_memory.py (test_eval_scripts.py runs it small)."""
import pytest
from engine_support import sub_batches

from adaptrubric_local.engine import memory
from adaptrubric_local.engine.architectures import ARCHITECTURES, qwen3vl_config

GB = 1e9


@pytest.fixture(scope="module")
def sizes_8b():
    return memory.Sizes.of(qwen3vl_config(ARCHITECTURES["Qwen/Qwen3-VL-8B-Instruct"]))


def test_the_terms_of_the_issue_for_8b_at_native_resolution(sizes_8b, monkeypatch):
    """8B, 14 rows of ~29K tokens (10 phone frames): KV 59.9 GB, the bool mask 11.8 GB and its bf16 copy
    23.6 GB, K/V repeated for one layer 6.7 GB, pixels 4.4 GB (the issue's figures), all counted."""
    monkeypatch.delenv("TRANSFORMERS_SDPA_FORCE_GQA", raising=False)
    rows, visual = [29_000] * 13 + [28_990], [25_500] * 14
    est = memory.estimate(sizes_8b, memory.Group(rows, visual, new_tokens=1), "sdpa", b=2, device="cuda")
    att = est.phases["attention"]
    assert att["kv_cache"] / GB == pytest.approx(59.9, rel=0.01)
    assert att["mask_bool"] / GB == pytest.approx(11.8, rel=0.01)
    T, q = 14 * 29_000, sizes_8b.q_dim
    copy_and_repeat = 14 * 29_000 ** 2 * 2 + 2 * T * q * 2
    assert copy_and_repeat / GB == pytest.approx(23.6 + 6.65, rel=0.01)
    assert att["attention"] >= copy_and_repeat  # inside the attention call's working set
    assert att["pixels"] / GB == pytest.approx(4.4, rel=0.02)
    assert att["vision_outputs"] / GB > 8  # the tower's outputs, kept by generate until it returns
    assert est.total / GB > 125  # the issue's 125 GB and more: the derived budget of 111 GB cannot hold it


def test_the_per_row_path_has_no_l_by_l_term(sizes_8b, monkeypatch):
    """At a fixed number of padded tokens, longer rows cost SDPA's path more (mask, its copy); the
    per-row path and flash-attention do not care."""
    monkeypatch.delenv("TRANSFORMERS_SDPA_FORCE_GQA", raising=False)  # as on CUDA (the CPU engine sets it)

    def total(attn, rows, width):
        return memory.estimate(sizes_8b, memory.Group([width] * rows, [0] * rows, left_padded=True), attn).total

    l_by_l = (32_768 ** 2 - 8 * 4096 ** 2) * 3  # bool mask and its bf16 copy
    for attn in ("sdpa", "sdpa_padded_prefill", "flash_attention_2"):
        short, long = total(attn, 8, 4096), total(attn, 1, 32_768)
        if attn == "sdpa":
            assert long - short >= 0.4 * l_by_l
        else:
            assert abs(long - short) < 0.02 * short, attn
    # equal rows: transformers skips the mask (SDPA's is_causal) and the K/V repeat
    same = memory.estimate(sizes_8b, memory.Group([8192, 8192], [0, 0]), "sdpa").phases["attention"]
    assert "mask_bool" not in same


def test_k_v_are_repeated_only_without_forced_grouped_query_attention(sizes_8b, monkeypatch):
    g = memory.Group([4096, 2048], [0, 0])
    monkeypatch.setenv("TRANSFORMERS_SDPA_FORCE_GQA", "1")
    forced = memory.estimate(sizes_8b, g, "sdpa").detail["attention_call"]
    monkeypatch.setenv("TRANSFORMERS_SDPA_FORCE_GQA", "0")
    repeated = memory.estimate(sizes_8b, g, "sdpa").detail["attention_call"]
    assert repeated - forced == 2 * 2 * 4096 * sizes_8b.q_dim * 2


def test_cuda_counts_masked_scatters_prefix_sum(sizes_8b):
    g = memory.Group([8192], [7000])
    cuda = memory.estimate(sizes_8b, g, "sdpa", device="cuda").phases["merge"]
    assert cuda["masked_scatter"] == 2 * 8192 * 4096 * 2 + 9 * 8192 * 4096  # clone, int64 prefix sum, bool mask


def test_rows_that_fit_and_the_token_bound(sizes_8b, monkeypatch):
    monkeypatch.delenv("TRANSFORMERS_SDPA_FORCE_GQA", raising=False)
    budget = memory.free_budget(120 * memory.GiB)
    n_sdpa = memory.rows_that_fit(sizes_8b, 28_000, 25_500, 1024, "sdpa", 2, budget)
    n_row = memory.rows_that_fit(sizes_8b, 28_000, 25_500, 1024, "sdpa_padded_prefill", 2, budget)
    assert 0 < n_sdpa < n_row < 14  # the old derived budget's 14 rows do not fit on either path
    bound = memory.tokens_bound(sizes_8b, "sdpa", 2, budget)
    assert bound >= n_row * 28_000


def test_the_engine_sizes_groups_by_the_memory_model_on_a_gpu(tiny_engine, monkeypatch):
    """A memory budget (what a GPU engine derives from free memory) cuts groups of long rows before
    groups of short ones, at the same padded-token budget."""
    eng = tiny_engine
    monkeypatch.setattr(eng, "attn", "sdpa")
    shape = {i: (4000 - 8 * i, 0, 16) if i < 8 else (504 - 8 * i, 0, 16) for i in range(16)}  # widths of 8k
    est = {i: shape[i][0] + 16 for i in shape}
    one_long = memory.estimate(eng.sizes, memory.Group([4000] * 2, [0] * 2, 16, left_padded=True), "sdpa",
                               b=eng._dtype_bytes()).total
    monkeypatch.setattr(eng, "memory_budget", one_long * 1.05)
    groups = sub_batches(eng, list(range(16)), est, shape)
    assert [len(g) for g in groups[:4]] == [2, 2, 2, 2]  # the long rows, two at a time
    assert len(groups[4]) > 2  # short rows: more of them fit the same bytes
    for g in groups:
        grp = memory.Group([shape[i][0] for i in g], [0] * len(g), 16)
        assert memory.estimate(eng.sizes, grp, "sdpa", b=eng._dtype_bytes()).total <= eng.memory_budget


def test_the_docs_table_is_the_scripts(monkeypatch):
    """docs/engines.md's rows-per-GPU table is what eval/batch_memory_table.py prints now (under the script's CUDA
    rule: no TRANSFORMERS_SDPA_FORCE_GQA, which a CPU engine load in this session may have set)."""
    import importlib.util
    from pathlib import Path

    monkeypatch.delenv("TRANSFORMERS_SDPA_FORCE_GQA", raising=False)
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("batch_memory_table", root / "eval" / "batch_memory_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.table()
    page = (root / "docs" / "engines.md").read_text()
    for line in mod.markdown(rows).splitlines():
        assert line in page, line
    rows = {(r["model"], r["visual"], r["attn"]): r["rows"] for r in rows}
    assert rows[("Qwen/Qwen3-VL-8B-Instruct", "native", "sdpa")][24] == 0  # not one native row on 24 GB
