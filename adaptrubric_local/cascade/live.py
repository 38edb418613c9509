"""The cascade as a reward (RewardModel(judge=...), `adaptrubric serve`): each call's verdicts go
through the student, the escalated ones through the judge, and the spot checks feed a sliding window
of the student's agreement with the judge on the rollouts being scored now, with its 95% interval and
a warning when the interval's upper end falls below `warn_below` (the reward has drifted from the
judge, or the policy has found where the student is wrong).

Only spot checks that nothing else sent count in the window (a random sample of the verdicts the
student decides, so the figure is the student-decided reward's agreement). Knows nothing about RL
frameworks or HTTP.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from ..audit.verdict import wilson
from ..engine.base import Engine
from ..pipeline import AdaptRubric
from ..types import Trajectory
from .config import CascadeConfig
from .health import JudgeHealth
from .report import CascadeTally, spot_agreement
from .scorer import Cascade, CascadeVerdict

log = logging.getLogger("adaptrubric.cascade")


def drifted(ci: tuple[float, float] | None, warn_below: float) -> bool:
    """Whether to warn: the upper end of the window's interval is below `warn_below` (the lower end
    would warn on noise: a small window's interval always reaches low)."""
    return ci is not None and ci[1] < warn_below


def watch(cfg: CascadeConfig, judge_engine: Engine, notify: Callable[[str], None] | None = None,
          then: str = "") -> JudgeHealth | None:
    """The watcher of a judge_url endpoint (health.py), started, saying when the judge stops or starts
    answering; None for a judge in this process.

    Args:
        cfg: the cascade's settings (`judge_url`, the endpoint to probe).
        judge_engine: the judge's engine; its `cutoff` is cut while the judge is down.
        notify: what says it (default: this module's logger, as a warning).
        then: added to the "stopped answering" message (what to do about the lines it missed).
    """
    cutoff = getattr(judge_engine, "cutoff", None)
    if not cfg.judge_url or cutoff is None:
        return None
    endpoint = cfg.endpoint()  # probed with GET {url}/models, no retry
    return JudgeHealth(lambda timeout: endpoint.served_models(retries=0, timeout=timeout), notify or log.warning,
                       what=f"the judge at {cfg.judge_url}", on_down=cutoff.cut, on_up=cutoff.restore,
                       then=then).start()


class LiveCascade:
    """A student pipeline with a judge, scoring calls in order and keeping the live agreement."""

    def __init__(self, student: AdaptRubric, judge_engine: Engine, cfg: CascadeConfig):
        self.cfg = cfg
        self.health = watch(cfg, judge_engine)
        self.cascade = Cascade(student, AdaptRubric(judge_engine, student.config), cfg.band(), cfg.spot_check,
                               cfg.spot_check_seed, health=self.health)
        self.window: deque[bool] = deque(maxlen=cfg.agreement_window)
        self.tally = CascadeTally()
        self.lock = threading.Lock()
        self.warned = False

    @classmethod
    def build(cls, student: AdaptRubric, cfg: CascadeConfig, engine: Engine | None = None) -> LiveCascade:
        """With `engine` the judge's engine as given; else built from `cfg` (an endpoint asked once first)."""
        judge = cfg.teacher(student.config.verify_max_new_tokens).build(what="judge") if engine is None else engine
        return cls(student, judge, cfg)

    def score(self, trajs: list[Trajectory]) -> list[CascadeVerdict]:
        """One cascade line per trajectory, in order."""
        by_id = {str(v.id): v for ready in self.cascade.iter_ready(trajs) for v in ready}
        out = [by_id[str(t.id)] for t in trajs]
        self._count(out)
        return out

    def _count(self, lines: list[CascadeVerdict]) -> None:
        with self.lock:
            for v in lines:
                d = vars(v)  # the fields as they are, read only: no deep copy of a line per verdict
                self.tally.add(d)
                # the window: spot checks that nothing else sent, which the judge answered (a random sample
                # of the lines the student decides; a line the band sent is not one)
                agreed = spot_agreement(d, only=True)
                if agreed is not None:
                    self.window.append(agreed)
            ci = wilson(sum(self.window), len(self.window))
            low = drifted(ci, self.cfg.warn_below)
            if low and not self.warned:
                log.warning("the student's live agreement with the judge is %d/%d (95%% interval %.2f-%.2f), below "
                            "warn_below %.2f: the reward has drifted from the judge or is being gamed",
                            sum(self.window), len(self.window), ci[0], ci[1], self.cfg.warn_below)
            self.warned = low

    def stats(self) -> dict:
        """The live figures: counts, the window's agreement and interval, and whether to worry."""
        with self.lock:
            k, n = sum(self.window), len(self.window)
            t = self.tally
            counts = {"trajectories": t.n, "decided_by_judge": t.by_judge, "sent_to_judge": t.sent,
                      "judge_failed": sum(t.failed_by.values()), "why": dict(t.why)}
            share = t.sent / t.n if t.n else None
        ci = wilson(k, n)
        return {**counts, "judge_share": share,
                "agreement": {"window": self.cfg.agreement_window, "n": n, "agree": k,
                              "rate": k / n if n else None, "ci95": ci, "warn_below": self.cfg.warn_below,
                              "warning": drifted(ci, self.cfg.warn_below)},
                "band": list(self.cascade.band), "spot_check": self.cfg.spot_check}

    def close(self) -> None:
        if self.health is not None:
            self.health.stop()
        if self.cascade.judge.engine is not None:
            self.cascade.judge.engine.close()
