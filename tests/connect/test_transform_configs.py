"""Transform and predicate configs are validated at construction, every bad field listed."""
import pytest

from connect.errors import ConfigError
from connect.predicates import predicate
from connect.transforms import from_connector_config, transform

T = "org.apache.kafka.connect.transforms."


def errors_of(class_name, config):
    with pytest.raises(ConfigError) as e:
        transform(class_name, config)
    return e.value.details["errors"]


@pytest.mark.parametrize("cls,config,field", [
    ("RegexRouter", {"regex": "("}, "regex"),
    ("RegexRouter", {"regex": "a"}, "replacement"),
    ("MaskField$Value", {}, "fields"),
    ("MaskField$Value", {"fields": "a", "replacement": ""}, "replacement"),
    ("Cast$Value", {"spec": "a:int99"}, "spec"),
    ("Cast$Value", {"spec": "a:bytes"}, "spec"),
    ("Cast$Value", {"spec": "int32,a:int8"}, "spec"),
    ("ReplaceField$Value", {"renames": "a:b,c"}, "renames"),
    ("InsertField$Value", {}, "topic.field"),
    ("InsertField$Value", {"static.field": "s"}, "static.value"),
    ("TimestampConverter$Value", {"target.type": "string"}, "format"),
    ("TimestampConverter$Value", {"target.type": "weekday"}, "target.type"),
    ("TimestampConverter$Value", {"target.type": "unix", "unix.precision": "hours"}, "unix.precision"),
    ("TimestampConverter$Value", {"target.type": "string", "format": "YYYY-ww"}, "format"),
    ("ExtractField$Key", {}, "field"),
    ("ExtractField$Key", {"field": "a", "field.syntax.version": "V3"}, "field.syntax.version"),
    ("HoistField$Value", {}, "field"),
    ("ValueToKey", {"fields": ""}, "fields"),
    ("DropHeaders", {}, "headers"),
    ("InsertHeader", {"header": "h"}, "value.literal"),
    ("HeaderFrom$Value", {"fields": "a,b", "headers": "h", "operation": "copy"}, "headers"),
    ("HeaderFrom$Value", {"fields": "a", "headers": "h", "operation": "steal"}, "operation"),
    ("TimestampRouter", {"timestamp.format": "yyyyMMdd'"}, "timestamp.format"),
])
def test_bad_field_is_named(cls, config, field):
    assert field in errors_of(T + cls, config)


def test_every_bad_field_is_listed_at_once():
    errors = errors_of(T + "HeaderFrom$Value", {"operation": "x", "replace.null.with.default": "maybe"})
    assert set(errors) == {"fields", "headers", "operation", "replace.null.with.default"}


def test_debezium_options():
    errors = errors_of("io.debezium.transforms.ExtractNewRecordState",
                       {"delete.handling.mode": "erase", "delete.tombstone.handling.mode": "keep",
                        "drop.tombstones": "yes"})
    assert set(errors) == {"delete.handling.mode", "delete.tombstone.handling.mode", "drop.tombstones"}


def test_defaults_are_kafkas():
    assert transform(T + "Flatten$Value").values["delimiter"] == "."
    r = transform(T + "TimestampRouter").values
    assert (r["topic.format"], r["timestamp.format"]) == ("${topic}-${timestamp}", "yyyyMMdd")
    assert transform(T + "TimestampConverter$Value", {"target.type": "unix"}).values["unix.precision"] == "milliseconds"


def test_predicates_and_connector_config():
    with pytest.raises(ConfigError) as e:
        predicate(T + "predicates.TopicNameMatches", {})
    assert "pattern" in e.value.details["errors"]
    with pytest.raises(ConfigError) as e:
        from_connector_config({"transforms": "a,b,c", "transforms.a.type": T + "RegexRouter",
                               "transforms.b.type": T + "Nope", "transforms.c.type": T + "Filter",
                               "transforms.c.predicate": "p", "transforms.c.negate": "perhaps"})
    assert set(e.value.details["errors"]) == {"transforms.a.regex", "transforms.a.replacement", "transforms.b.type",
                                              "transforms.c.predicate", "transforms.c.negate"}
    steps = from_connector_config({"transforms": "f", "transforms.f.type": T + "Filter",
                                   "transforms.f.predicate": "t", "transforms.f.negate": "true",
                                   "predicates": "t", "predicates.t.type": T + "predicates.RecordIsTombstone"})
    assert steps[0].negate and steps[0].predicate is not None


@pytest.mark.parametrize("path, steps", [
    ("a.b", ["a", "b"]), ("`a.b`.c", ["a.b", "c"]), ("`a`b`.c", ["a`b", "c"]), ("`a\\`.b`", ["a`.b"]),
    ("a.b.", ["a", "b", ""]), ("a", ["a"]), ("`a.b`", ["a.b"]), ("x.`y.z`", ["x", "y.z"])])
def test_v2_field_paths_split_as_kafkas_single_field_path(path, steps):
    """KIP-821's rules: a quoted step ends at a backtick followed by a dot or ending the path."""
    from connect.field_transforms import field_path
    assert field_path(path, "V2") == steps and field_path(path, "V1") == [path]


@pytest.mark.parametrize("path", ["`a.b", "`a\\`"])
def test_an_unclosed_backtick_is_refused_at_config(path):
    with pytest.raises(ConfigError, match="Incomplete backtick pair"):
        transform(T + "ExtractField$Value", {"field": path, "field.syntax.version": "V2"})


def test_debezium_modes_are_read_trimmed_in_any_case():
    """Debezium's EnumRecommender trims and its parsing ignores case."""
    unwrap = "io.debezium.transforms.ExtractNewRecordState"
    assert transform(unwrap, {"delete.tombstone.handling.mode": " REWRITE-with-tombstone "})._modes() == ("rewrite", True)
    assert transform(unwrap, {"delete.handling.mode": "None", "drop.tombstones": "false"})._modes() == ("tombstone", True)
    with pytest.raises(ConfigError, match="delete.handling.mode"):
        transform(unwrap, {"delete.handling.mode": "bogus"})


def test_set_schema_metadata_config_is_kafkas():
    """SetSchemaMetadata.configure: a name or a version is required; schema.version is ConfigDef's INT."""
    for variant in ("SetSchemaMetadata$Value", "SetSchemaMetadata$Key"):
        assert errors_of(T + variant, {}) == {"schema.name": ["Neither schema name nor version configured"]}
    assert errors_of(T + "SetSchemaMetadata$Value", {"schema.version": "two"}) == \
        {"schema.version": ["Invalid value two for configuration schema.version: Not a number of type INT"]}
    assert "schema.version" in errors_of(T + "SetSchemaMetadata$Value", {"schema.version": str(1 << 31)})
    v = transform(T + "SetSchemaMetadata$Value", {"schema.version": " 3 "}).values
    assert (v["schema.name"], v["schema.version"], v["replace.null.with.default"]) == (None, 3, True)
    assert transform(T + "SetSchemaMetadata$Key", {"schema.name": "k"}).target == "key"
