"""The transition-table helper every lifecycle uses (broker/state_machine.py)."""
from __future__ import annotations

import enum

import pytest

from broker.state_machine import IllegalStateTransition, Transitions

pytestmark = pytest.mark.unit


class Light(enum.Enum):
    RED = 1
    GREEN = 2
    YELLOW = 3
    OFF = 4


TABLE = Transitions("light", {Light.RED: {Light.GREEN, Light.OFF}, Light.GREEN: {Light.YELLOW},
                              Light.YELLOW: {Light.RED, Light.YELLOW}, Light.OFF: set()})


def test_allowed_moves_return_the_new_state():
    assert TABLE.move(Light.RED, Light.GREEN) is Light.GREEN
    assert TABLE.move(Light.YELLOW, Light.YELLOW) is Light.YELLOW


@pytest.mark.parametrize("current, target", [(Light.RED, Light.YELLOW), (Light.GREEN, Light.GREEN),
                                             (Light.OFF, Light.RED), (Light.GREEN, Light.RED)])
def test_a_move_the_table_does_not_list_fails_loudly_naming_both_states(current, target):
    with pytest.raises(IllegalStateTransition, match=f"light: {current.name} -> {target.name}"):
        TABLE.move(current, target)
    assert not TABLE.can_move(current, target)


def test_every_state_must_be_listed_and_finals_are_those_with_no_moves():
    assert TABLE.finals() == {Light.OFF}
    with pytest.raises(ValueError, match="OFF"):
        Transitions("light", {Light.RED: {Light.GREEN}, Light.GREEN: {Light.YELLOW}, Light.YELLOW: {Light.RED}})
