"""``riverlog groups list`` / ``--all-groups``: a broker that could not list its groups fails the
listing (Kafka's tool calls ``listConsumerGroups().all()``) instead of a list with its groups
missing; a coordinator still loading is asked again, as Kafka's admin client retries it."""
from __future__ import annotations

import pytest

from broker.cli.group_selection import listed_groups
from broker.errors import CoordinatorLoadInProgressError, InvalidRequestError

pytestmark = pytest.mark.unit


class Result:
    def __init__(self, valid, errors):
        self.valid, self.errors = valid, errors


class Future:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class Admin:
    """Answers each ``list_consumer_groups`` call with the next of ``answers``."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def list_consumer_groups(self, **filters):
        self.calls.append(filters)
        return Future(self.answers.pop(0))


def test_a_loading_coordinator_is_asked_again_until_it_lists_its_groups():
    admin = Admin(Result(["a"], [CoordinatorLoadInProgressError("loading")]), Result(["a", "b"], []))
    assert listed_groups(admin, states={"Stable"}) == ["a", "b"]
    assert admin.calls == [{"states": {"Stable"}}, {"states": {"Stable"}}]


def test_a_broker_that_cannot_list_fails_the_listing():
    with pytest.raises(InvalidRequestError):
        listed_groups(Admin(Result(["a"], [InvalidRequestError("no")])))
    with pytest.raises(CoordinatorLoadInProgressError):
        listed_groups(Admin(*[Result(["a"], [CoordinatorLoadInProgressError("loading")])] * 3), timeout_s=0)
