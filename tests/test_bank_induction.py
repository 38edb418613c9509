"""Bank induction and refinement with a scripted teacher and a scripted verifier (ScriptedEngine), and the
router following the bank in use."""
from __future__ import annotations

import json

import pytest
import yaml

from adaptrubric_local.bank import DEFAULT_BANK, RubricBank, load_bank
from adaptrubric_local.bank_induction import InduceConfig, RefineConfig, induce, refine
from adaptrubric_local.bank_induction.synthetic import ScriptedTeacher, make_domain, scripted_teacher, scripted_verifier
from adaptrubric_local.bank_induction.teacher import DimensionsReply, parse_reply
from adaptrubric_local.cli import main
from adaptrubric_local.engine.fake import ScriptedEngine
from adaptrubric_local.formats import load_trajectories
from adaptrubric_local.pipeline import AdaptRubric, PipelineConfig
from adaptrubric_local.prompts import load_prompts, render
from adaptrubric_local.route import bank_router_prompt, parse_router_output, router_prompt
from adaptrubric_local.schema import SchemaError
from adaptrubric_local.types import RouteResult


@pytest.fixture(scope="module")
def induced(domain, tmp_path_factory):
    path, trajs = domain
    out = tmp_path_factory.mktemp("bank") / "shopdesk.yaml"
    summary = induce(trajs, out, scripted_teacher(), InduceConfig(name="shopdesk", domain="ShopDesk"),
                     data_desc=str(path))
    return out, summary


# ------------------------------------------------------------------ induce
def test_induced_bank_validates_and_keeps_the_meta_rule(induced, capsys):
    out, summary = induced
    assert main(["bank", "validate", str(out)]) == 0
    assert "OK (4 families" in capsys.readouterr().out
    bank, paper = load_bank(out), load_bank()
    assert bank.taxonomy == "custom" and list(bank.families) == ["crm_lookup", "crm_update", "crm_refund", "general"]
    assert bank.meta_rule == paper.meta_rule and bank.output_formats == paper.output_formats
    assert bank.fallback == "general" and bank.families["general"].categories == ["*"]
    rec = bank.record[0]
    assert rec.step == "induce" and rec.teacher == "scripted-teacher" and rec.prompts.endswith("induction.yaml")
    assert rec.details["sampled"] == summary["sampled"] == 48 and rec.details["sampled_success"] == 24
    assert rec.teacher_calls == summary["teacher_calls"] == 48 // 8 + 1
    assert "scripted-teacher" in bank.source


def test_induce_shows_screenshots_and_labels_and_reuses_dimensions(domain, tmp_path):
    _path, trajs = domain
    seen = []
    teacher = ScriptedTeacher()
    eng = ScriptedEngine(lambda r: (seen.append(r), teacher(r))[1], name="t")
    out = tmp_path / "b.yaml"
    induce(trajs, out, eng, InduceConfig(per_call=6, images_per_traj=2))
    dims = [r for r in seen if "List the verification dimensions" in r.suffix]
    assert len(dims) == 8 and all(len(r.images) == 12 for r in dims)  # 6 trajectories x 2 screenshots
    assert "LABEL: SUCCESS" in dims[0].prompt and "LABEL: FAILURE" in dims[0].prompt
    assert "ACTION TRACE:" in dims[0].prompt and "Key actions performed" in dims[0].prompt
    assert (tmp_path / "b.yaml.work" / "dimensions.jsonl").exists()
    seen.clear()
    induce(trajs, out, eng, InduceConfig(per_call=6, images_per_traj=2))  # same sample: only the grouping call
    assert len(seen) == 1 and "Group the dimensions" in seen[0].prompt


def test_induce_keep_rewrites_texts_of_the_papers_families(domain, tmp_path):
    _path, trajs = domain
    out = tmp_path / "keep.yaml"
    induce(trajs, out, scripted_teacher(), InduceConfig(keep_families=True), data_desc="d")
    bank, paper = load_bank(out), load_bank()
    assert bank.taxonomy == "paper" and list(bank.families) == list(paper.families)
    for name, rs in bank.families.items():
        assert rs.description == f"Rewritten for ShopDesk: {name}."
        assert rs.verification_steps == ["Check the outcome in ShopDesk."]
        assert rs.rubric_items == paper.families[name].rubric_items and rs.id == paper.families[name].id
    ps = load_prompts()
    assert router_prompt(ps, bank, "X") == render(ps.router, "router", instruction="X")  # router unchanged


def test_unreadable_teacher_reply_is_reported(domain, tmp_path):
    _, trajs = domain
    with pytest.raises(ValueError, match="no verification dimensions.*no JSON object"):
        induce(trajs, tmp_path / "b.yaml", ScriptedEngine(lambda r: "I think it went fine.", name="t"))
    assert not (tmp_path / "b.yaml").exists()
    reply, why = parse_reply('```json\n{"dimensions": [{"name": "x"}]}\n```', DimensionsReply)
    assert reply is None and "dimensions.0.check" in why


def test_induce_needs_both_labels(domain, tmp_path):
    _, trajs = domain
    with pytest.raises(ValueError, match="successes and failures"):
        induce([t for t in trajs if t.label == 1], tmp_path / "b.yaml", scripted_teacher())


# ------------------------------------------------------------------ the router follows the bank
def test_default_bank_router_prompt_is_the_papers():
    ps, bank = load_prompts(), load_bank()
    paper = render(ps.router, "router", instruction="Open the app")
    assert router_prompt(ps, bank, "Open the app") == paper
    assert bank_router_prompt(ps, bank, "Open the app") == paper  # the bank-driven template gives the same text


def test_custom_family_in_router_prompt_and_routing(induced, domain):
    out, _ = induced
    _, trajs = domain
    bank, ps = load_bank(out), load_prompts()
    text = router_prompt(ps, bank, "Issue a refund for order #1003 in ShopDesk.")
    assert "one of 4 rubric families" in text
    assert "- crm_refund : the agent issues a refund for an order" in text
    assert "CATEGORY: <one of crm_lookup | crm_update | crm_refund | general>" in text
    assert "composite_workflow" not in text and "Prefer a specific family over general" in text
    pipe = AdaptRubric(scripted_verifier(), PipelineConfig(bank_path=str(out)))
    cats = {t.task_id.split("-")[0]: v.category for t, v in zip(trajs, pipe.score(trajs))}
    assert cats == {"lookup": "crm_lookup", "update": "crm_update", "refund": "crm_refund"}
    res = parse_router_output("CATEGORY: crm refund", bank.family_names, bank.fallback)
    assert (res.category, res.parsed) == ("crm_refund", True)
    res = parse_router_output("CATEGORY: info_query", bank.family_names, bank.fallback)
    assert (res.category, res.parsed) == ("general", False)  # not one of this bank's families


def test_rules_router_with_a_custom_bank_falls_back(induced):
    out, _ = induced
    pipe = AdaptRubric(None, PipelineConfig(router="rules", fine=False, bank_path=str(out)))
    r = pipe.route_many(["What is the phone number of Ada?"])["What is the phone number of Ada?"]
    assert r == RouteResult(category="general", mode="rules", raw="info_query", parsed=True)


def _doc(path=DEFAULT_BANK):
    return yaml.safe_load(open(path))


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d["families"].update(shopping=d["families"]["info_query"]), "taxonomy: custom"),
    (lambda d: (d.update(taxonomy="custom"), d["families"]["general"].update(categories=["general"])),
     "exactly one fallback family"),
    (lambda d: (d.update(taxonomy="custom"), d["families"].update({"Bad-Name": d["families"].pop("info_query")})),
     "snake_case"),
    (lambda d: (d.update(taxonomy="custom"), d["families"]["info_query"].update(categories=["other"])),
     "families.info_query.categories"),
])
def test_bank_schema_for_custom_families(tmp_path, mutate, needle):
    d = _doc()
    mutate(d)
    p = tmp_path / "b.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(SchemaError) as exc:
        load_bank(p)
    assert needle in str(exc.value) and str(p) in str(exc.value)


def test_custom_bank_hash_ignores_the_record(induced):
    bank = load_bank(induced[0])
    doc = bank.model_dump(mode="json")
    doc["record"] = []
    assert RubricBank.model_validate(doc).sha == bank.sha


# ------------------------------------------------------------------ refine
def test_refine_keeps_a_fixing_revision_and_rejects_a_useless_one(induced, domain, tmp_path):
    bank_path, _ = induced
    _path, trajs = domain
    out = tmp_path / "refine"
    rep = refine(trajs, bank_path, out, scripted_verifier(), scripted_teacher(), RefineConfig(rounds=2), data_desc="d")
    assert rep["status"] == "done"
    for k in (0, 1, 2):
        assert load_bank(out / f"round_{k}.yaml")
    assert (out / "round_1.diff.md").exists() and (out / "round_2.diff.md").exists()
    r1 = next(r for r in rep["rounds"] if r["round"] == 1)
    assert r1["changes"]["crm_update"]["decision"] == "kept"
    assert r1["changes"]["crm_refund"]["decision"] == "rejected"  # "Be thorough." fixes nothing on validation
    assert r1["changes"]["crm_lookup"]["decision"] == "no disagreements"
    ch = r1["changes"]["crm_update"]
    assert ch["val_acc_after"] > ch["val_acc_before"]
    diff = (out / "round_1.diff.md").read_text()
    assert "+- Check that the trajectory shows a click on Save." in diff and "+- Be thorough." in diff
    accs = [r["val"]["acc"] for r in rep["rounds"] if "val" in r]
    assert accs[0] < accs[1] < accs[2] == 100.0
    r1_bank = load_bank(out / "round_1.yaml")
    assert "Be thorough." not in r1_bank.families["crm_refund"].verification_steps
    assert [s.step for s in r1_bank.record] == ["induce", "refine round 1"]
    # the validation split was never shown to the teacher
    val_ids = set(rep["val_ids"])
    prompts = [json.loads(line)["prompt"] for line in (out / "teacher.jsonl").read_text().splitlines()]
    assert prompts and not any(f"[{i}]" in p for p in prompts for i in val_ids)
    assert any("[" in p and "LABEL" in p for p in prompts)
    md = (out / "report.md").read_text()
    assert "| 2 | crm_refund |" in md and "val F1" in md


def test_teacher_failure_mid_run_loses_nothing_written(induced, domain, tmp_path):
    bank_path, _ = induced
    _, trajs = domain
    out = tmp_path / "refine"
    calls = {"n": 0}

    def fail(req):
        calls["n"] += 1
        return "endpoint down" if calls["n"] > 2 else None  # round 1's two calls work, round 2's fail

    teacher = ScriptedEngine(ScriptedTeacher(), name="scripted-teacher", fail=fail)
    rep = refine(trajs, bank_path, out, scripted_verifier(), teacher, RefineConfig(rounds=2))
    assert rep["status"].startswith("stopped in round 2") and "endpoint down" in rep["status"]
    assert not (out / "round_2.yaml").exists()
    r1 = (out / "round_1.yaml").read_text()
    assert load_bank(out / "round_1.yaml") and (out / "round_1.diff.md").exists()
    saved = json.loads((out / "report.json").read_text())
    assert [r["round"] for r in saved["rounds"] if "val" in r] == [0, 1]
    with pytest.raises(ValueError, match="--resume"):
        refine(trajs, bank_path, out, scripted_verifier(), scripted_teacher(), RefineConfig(rounds=2))
    rep = refine(trajs, bank_path, out, scripted_verifier(), scripted_teacher(useless_first=()), RefineConfig(rounds=2),
                 resume=True)
    assert rep["status"] == "done" and (out / "round_1.yaml").read_text() == r1
    assert load_bank(out / "round_2.yaml").families["crm_refund"].verification_steps[-1].endswith("a click on Confirm.")


def test_one_family_teacher_error_keeps_that_family(induced, domain, tmp_path):
    bank_path, _ = induced
    _, trajs = domain
    teacher = ScriptedEngine(ScriptedTeacher(), name="t",
                             fail=lambda r: "overloaded" if "FAMILY: crm_refund" in r.prompt else None)
    rep = refine(trajs, bank_path, tmp_path / "r", scripted_verifier(), teacher, RefineConfig(rounds=1))
    ch = next(r for r in rep["rounds"] if r["round"] == 1)["changes"]
    assert ch["crm_refund"] == {"disagreements": ch["crm_refund"]["disagreements"], "decision": "teacher error",
                                "error": "overloaded"}
    assert ch["crm_update"]["decision"] == "kept" and rep["status"] == "done"


def test_refine_and_induce_run_on_the_transformers_engine(tiny_engine, tmp_path, induced):
    """The real engine path (tiny random Qwen3-VL): its outputs are noise, so routes fall back, verdicts
    are unparsed, and the teacher's unreadable replies are reported, never guessed at."""
    path = make_domain(tmp_path / "d", tasks_per_kind=2)
    trajs = load_trajectories(path).trajectories
    rep = refine(trajs, induced[0], tmp_path / "r", tiny_engine, scripted_teacher(), RefineConfig(rounds=1))
    assert rep["status"] == "done" and load_bank(tmp_path / "r" / "round_1.yaml")
    assert rep["rounds"][0]["val"]["n"] + rep["rounds"][0]["refine"]["n"] == len(trajs)
    with pytest.raises(ValueError, match="unparseable reply"):
        induce(trajs, tmp_path / "b.yaml", tiny_engine, InduceConfig(images_per_traj=2))


def test_induction_prompts_load_strictly(tmp_path):
    from adaptrubric_local.bank_induction.prompts import DEFAULT_INDUCTION_PROMPTS, load_induction_prompts
    from adaptrubric_local.prompts import TemplateError

    assert load_induction_prompts().sha and load_induction_prompts().path.endswith("induction.yaml")
    doc = yaml.safe_load(DEFAULT_INDUCTION_PROMPTS.read_text())
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({**doc, "grouping_hint": "x"}))
    with pytest.raises(SchemaError, match="grouping_hint.*unknown key"):
        load_induction_prompts(p)
    p.write_text(yaml.safe_dump({**doc, "refine": doc["refine"].replace("{cases}", "")}))
    with pytest.raises(TemplateError, match="'refine'.*cases"):
        load_induction_prompts(p)
