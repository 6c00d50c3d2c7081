"""Config alters are applied by the controller to the overrides its image holds (Kafka's
ConfigurationControlManager): an IncrementalAlterConfigs merged on a broker whose metadata was
behind replaced the overrides with its stale view, silently undoing an acknowledged alter."""
from __future__ import annotations

import pytest

from broker.config import APPEND, SUBTRACT, altered_configs, topic_defaults
from broker.errors import InvalidConfigError, InvalidRequestError
from tests.unit.test_quorum_controller import Harness

pytestmark = pytest.mark.unit

SET, DELETE = 0, 1


def test_two_incremental_alters_both_stay():
    """The second alter names only its own key; the first one's stays, whatever the sending broker saw."""
    h = Harness()
    h.create("t", partitions=1, rf=1)
    defaults = topic_defaults(h.config)
    h.commit(h.c.alter_topic_configs(h.image, "t", [(SET, "retention.ms", "1000")], True, defaults))
    h.commit(h.c.alter_topic_configs(h.image, "t", [(SET, "segment.ms", "60000")], True, defaults))
    assert h.image.topics["t"].configs == {"retention.ms": "1000", "segment.ms": "60000"}
    h.commit(h.c.alter_topic_configs(h.image, "t", [(APPEND, "cleanup.policy", "compact"),
                                                    (DELETE, "retention.ms", "")], True, defaults))
    assert h.image.topics["t"].configs == {"segment.ms": "60000", "cleanup.policy": "delete,compact"}


def test_a_non_incremental_alter_replaces_every_override():
    h = Harness()
    h.create("t", partitions=1, rf=1, **{"retention.ms": "1000"})
    h.commit(h.c.alter_topic_configs(h.image, "t", [(SET, "segment.ms", "60000")], False, topic_defaults(h.config)))
    assert h.image.topics["t"].configs == {"segment.ms": "60000"}


def test_the_operations_are_checked_as_kafkas():
    with pytest.raises(InvalidConfigError, match="Can't APPEND to key retention.ms because its type is not LIST"):
        altered_configs({}, [(APPEND, "retention.ms", "1")], {}, True)
    with pytest.raises(InvalidRequestError, match="use incremental_alter_configs"):
        altered_configs({}, [(SUBTRACT, "cleanup.policy", "delete")], {}, False)
    assert altered_configs({"cleanup.policy": "compact,delete"}, [(SUBTRACT, "cleanup.policy", "delete")],
                           {}, True) == {"cleanup.policy": "compact"}
