"""The peer tier of `parity probe`: a seeded probe set sent to smg (installed and started from
its profile) and to the reference gateway, compared. Opt in with `pytest --peers tests/peers`."""

from __future__ import annotations

import pytest

from responses_parity.harness.defaults import DEFAULT_MODEL
from responses_parity.harness.engine.profile import load_profile, profile_paths
from responses_parity.harness.options import TargetOptions
from responses_parity.harness.probe.generate import all_probes, select
from responses_parity.harness.probe.run import DESCRIPTION_SOURCE, REFERENCE_SOURCE, run_probes
from responses_parity.harness.probe.send import BASE_INPUT
from responses_parity.harness.scenario.capabilities import MEANING
from responses_parity.harness.wire.redaction import Redactor

pytestmark = pytest.mark.peers


def test_smg_answers_every_probe_it_can_take_and_its_divergences_are_grouped() -> None:
    probes = select(all_probes(DEFAULT_MODEL, BASE_INPUT), 17, 400)
    comparison = run_probes(TargetOptions(target="smg", timeout_s=30), "reference", probes, jobs=4,
                            redactor=Redactor(), say=print)
    sent, skipped = set(comparison.got), set(comparison.skipped)
    assert comparison.target == "smg" and sent | skipped == {probe.id for probe in probes} and not sent & skipped
    lacked_meanings = {MEANING[capability] for capability in load_profile(profile_paths()["smg"]).lacks}
    assert skipped and all(any(meaning in why for meaning in lacked_meanings) for why in comparison.skipped.values())
    silent = [probe_id for probe_id, outcome in comparison.got.items() if outcome.body == "no answer"]
    assert silent == []  # smg answers every probe it is sent, within the timeout
    counts = comparison.source_counts()
    assert set(counts) <= {REFERENCE_SOURCE, DESCRIPTION_SOURCE} and sum(counts.values()) == len(sent)
    assert sum(len(group.divergences) for group in comparison.groups) == len(comparison.divergences)
