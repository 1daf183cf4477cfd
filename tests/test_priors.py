"""The priors.json artifact: schema, validation, lookup, and the recommended choice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bayesrate.errors import ArtifactError
from bayesrate.priors import GammaPrior, PriorSet, find_artifact


def make(multipliers=None):
    return PriorSet(
        global_prior=GammaPrior(0.5, 2.0),
        domains={"a.com": GammaPrior(2.0, 4.0), "b.org": GammaPrior(1.0, 10.0)},
        hour_of_week=multipliers,
        metadata={
            "model": "hierarchical",
            "dataset": "x",
            "domain_extra": {"a.com": {"n_pages": 3}},
        },
    )


def test_round_trip_and_units(tmp_path):
    week = np.linspace(0.5, 1.5, 168)
    priors = make(week / week.mean())
    path = priors.save(tmp_path / "m")
    doc = json.loads(path.read_text())
    assert doc["units"]["rate"] == "changes per day"
    assert doc["domains"]["a.com"] == {"alpha": 2.0, "beta": 4.0, "n_pages": 3}
    back = PriorSet.load(tmp_path / "m")
    assert back.for_domain("a.com") == GammaPrior(2.0, 4.0)
    assert back.for_domain("unseen.net") == GammaPrior(0.5, 2.0)
    assert np.allclose(back.hour_of_week, week / week.mean())
    alpha, beta = back.arrays(["b.org", "zzz", "a.com"])
    assert alpha.tolist() == [1.0, 0.5, 2.0] and beta.tolist() == [10.0, 2.0, 4.0]


def test_moment_matching():
    p = GammaPrior.from_moments(0.3, 0.05)
    assert p.mean == pytest.approx(0.3) and p.variance == pytest.approx(0.05)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(kind="other"),
        lambda d: d.update(schema_version=99),
        lambda d: d["global"].update(alpha=-1),
        lambda d: d.pop("global"),
        lambda d: d.update(hour_of_week={"multipliers": [1.0] * 5}),
    ],
)
def test_malformed_artifacts_are_refused(tmp_path, edit):
    path = make().save(tmp_path)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError):
        PriorSet.load(path)


def test_find_artifact_prefers_recommended(tmp_path):
    assert find_artifact(tmp_path) is None
    make().save(tmp_path / "ota-contrib" / "hierarchical")
    make().save(tmp_path / "ota-contrib" / "modulated")
    (tmp_path / "ota-contrib" / "recommended.json").write_text('{"model": "hierarchical"}')
    assert find_artifact(tmp_path) == tmp_path / "ota-contrib" / "hierarchical" / "priors.json"
    (tmp_path / "ota-contrib" / "recommended.json").write_text('{"model": "modulated"}')
    assert find_artifact(tmp_path).parent.name == "modulated"


def test_default_prior_is_weak_in_beta():
    default = PriorSet.default().global_prior
    assert default.beta <= 1.0  # at most one pseudo-day of exposure
