"""The Kubernetes CEL shims on top of cel-python, each with hand-computed true and false cases."""

from __future__ import annotations

import pytest

from testcluster import cel
from testcluster.cel import NO_OLD, CELError, compile_rule, evaluate, evaluate_expression

# (expression, expected) - every expression is evaluated with no variables bound except `self`
# where noted; expected is the boolean the rule must return, or CELError when it must fail.
SHIMS = [
    # trim (Go's unicode.IsSpace, not Python's)
    ("'  a b \\t\\n'.trim() == 'a b'", True),
    ("'\\u00a0x\\u3000'.trim() == 'x'", True),
    ("'a '.trim() == 'a '", False),
    # lowerAscii / upperAscii touch ASCII letters only
    ("'ABC-1'.lowerAscii() == 'abc-1'", True),
    ("'ÀB'.lowerAscii() == 'àb'", False),
    ("'ÀB'.lowerAscii() == 'Àb'", True),
    ("'abc'.upperAscii() == 'ABC'", True),
    ("'é'.upperAscii() == 'É'", False),
    # split
    ("'a,b,c'.split(',') == ['a', 'b', 'c']", True),
    ("'a,b,c'.split(',', 2) == ['a', 'b,c']", True),
    ("'a,b,c'.split(',', 0) == []", True),
    ("'a,b,c'.split(',', -1) == ['a', 'b', 'c']", True),
    ("'abc'.split('') == ['a', 'b', 'c']", True),
    ("''.split(',') == ['']", True),
    ("'a,b'.split(',') == ['a,b']", False),
    # join
    ("['a', 'b'].join() == 'ab'", True),
    ("['a', 'b'].join('-') == 'a-b'", True),
    ("[].join('-') == ''", True),
    ("['a'].join('-') == 'a-'", False),
    # replace
    ("'aaa'.replace('a', 'b') == 'bbb'", True),
    ("'aaa'.replace('a', 'b', 2) == 'bba'", True),
    ("'aaa'.replace('a', 'b', 0) == 'aaa'", True),
    ("'aaa'.replace('x', 'b') == 'bbb'", False),
    # indexOf / lastIndexOf on strings (code points) and lists
    ("'hello'.indexOf('l') == 2", True),
    ("'hello'.indexOf('l', 3) == 3", True),
    ("'héllo'.indexOf('l') == 2", True),
    ("'hello'.indexOf('') == 0", True),
    ("'hello'.indexOf('z') == -1", True),
    ("'hello'.indexOf('h') == 1", False),
    ("'hello'.indexOf('l', 9) == 0", CELError),
    ("'hello'.lastIndexOf('l') == 3", True),
    ("'hello'.lastIndexOf('l', 2) == 2", True),
    ("'hello'.lastIndexOf('') == 5", True),
    ("'hello'.lastIndexOf('h') == 1", False),
    ("'hello'.lastIndexOf('l', 7) == 0", CELError),
    ("[1, 2, 3].indexOf(2) == 1", True),
    ("[1, 2, 3].indexOf(9) == -1", True),
    ("[1, 2, 1].lastIndexOf(1) == 2", True),
    ("[1, 2, 1].lastIndexOf(1) == 0", False),
    # substring / charAt
    ("'hello'.substring(1) == 'ello'", True),
    ("'hello'.substring(1, 3) == 'el'", True),
    ("'héllo'.substring(1, 2) == 'é'", True),
    ("'hello'.substring(0, 2) == 'hel'", False),
    ("'hello'.substring(3, 1) == ''", CELError),
    ("'hello'.substring(9) == ''", CELError),
    ("'héllo'.charAt(1) == 'é'", True),
    ("'abc'.charAt(3) == ''", True),
    ("'abc'.charAt(0) == 'b'", False),
    ("'abc'.charAt(4) == ''", CELError),
    # reverse, format
    ("'abc'.reverse() == 'cba'", True),
    ("[1, 2].reverse() == [2, 1]", True),
    ("'abc'.reverse() == 'abc'", False),
    ("'%s has %d items (%.2f%%)'.format(['list', 3, 12.5]) == 'list has 3 items (12.50%)'", True),
    ("'%s'.format([true]) == 'true'", True),
    ("'%d'.format([3]) == '4'", False),
    # size, matches, startsWith, endsWith, contains (standard, re-checked)
    ("size('héllo') == 5", True),
    ("'abc'.size() == 3", True),
    ("size([1, 2]) == 2 && size({'a': 1}) == 1", True),
    ("size('abc') == 4", False),
    ("'abc123'.matches('^[a-z]+[0-9]+$')", True),
    ("'abc'.matches('^[0-9]+$')", False),
    ("'abcdef'.startsWith('abc') && 'abcdef'.endsWith('def') && 'abcdef'.contains('cd')", True),
    ("'abcdef'.startsWith('def')", False),
    ("'abcdef'.contains('xyz')", False),
    # Kubernetes list library
    ("[1, 2, 2, 3].isSorted()", True),
    ("['a', 'b'].isSorted()", True),
    ("[2, 1].isSorted()", False),
    ("[1, 2, 3].sum() == 6", True),
    ("[1.5, 2.5].sum() == 4.0", True),
    ("[].sum() == 0", True),
    ("[1, 2].sum() == 4", False),
    ("[3, 1, 2].min() == 1", True),
    ("[3, 1, 2].max() == 3", True),
    ("['b', 'a'].max() == 'b'", True),
    ("[3, 1, 2].max() == 1", False),
    ("[].max() == 0", CELError),
    ("[].min() == 0", CELError),
    # cel-go list extensions
    ("[1, 2, 3, 4].slice(1, 3) == [2, 3]", True),
    ("[1, 2].slice(1, 5) == [2]", CELError),
    ("[[1], [2, [3]]].flatten() == [1, 2, [3]]", True),
    ("[[1], [2, [3]]].flatten(2) == [1, 2, 3]", True),
    ("[1, 2, 1, 3].distinct() == [1, 2, 3]", True),
    ("[3, 1, 2].sort() == [1, 2, 3]", True),
    ("[3, 1, 2].sort() == [3, 1, 2]", False),
    ("[1, 2, 3].slice(0, 1) == [1, 2]", False),
    ("[[1], [2]].flatten() == [[1], [2]]", False),
    ("[1, 1].distinct() == [1, 1]", False),
    # regex library
    ("'abc 123 def 456'.find('[0-9]+') == '123'", True),
    ("'abc'.find('[0-9]+') == ''", True),
    ("'abc 123'.find('[a-z]+') == '123'", False),
    ("'abc 123 def 456'.findAll('[0-9]+') == ['123', '456']", True),
    ("'1 2 3'.findAll('[0-9]', 2) == ['1', '2']", True),
    ("'abc'.findAll('[0-9]+') == ['1']", False),
    # url library
    ("url('https://example.com:8443/a%20b?q=1&q=2').getScheme() == 'https'", True),
    ("url('https://example.com:8443/p').getHost() == 'example.com:8443'", True),
    ("url('https://example.com:8443/p').getHostname() == 'example.com'", True),
    ("url('https://[::1]:80/p').getHostname() == '::1'", True),
    ("url('https://[::1]:80/p').getPort() == '80'", True),
    ("url('https://example.com/p').getPort() == ''", True),
    ("url('https://example.com/a%20b').getEscapedPath() == '/a%20b'", True),
    ("url('https://example.com/?q=1&q=2&r=x').getQuery() == {'q': ['1', '2'], 'r': ['x']}", True),
    ("url('/absolute/path').getEscapedPath() == '/absolute/path'", True),
    ("isURL('https://example.com/x')", True),
    ("isURL('not a url')", False),
    ("isURL('relative/path')", False),
    ("url('not a url').getScheme() == ''", CELError),
    ("url('https://example.com/p').getScheme() == 'http'", False),
    ("url('https://example.com:8443/p').getHost() == 'example.com'", False),
    ("url('https://example.com:8443/p').getHostname() == 'example.com:8443'", False),
    ("url('https://example.com:8443/p').getPort() == '443'", False),
    ("url('https://example.com/a').getEscapedPath() == '/b'", False),
    ("url('https://example.com/?q=1').getQuery() == {'q': ['2']}", False),
    # quantity library
    ("quantity('1Gi').isGreaterThan(quantity('1G'))", True),
    ("quantity('1G').isLessThan(quantity('1Gi'))", True),
    ("quantity('1Gi').isLessThan(quantity('1G'))", False),
    ("quantity('2k').asInteger() == 2000", True),
    ("quantity('500m').isInteger()", False),
    ("quantity('1.5').asApproximateFloat() == 1.5", True),
    ("quantity('1Mi').compareTo(quantity('1024Ki')) == 0", True),
    ("quantity('1').add(quantity('500m')).compareTo(quantity('1500m')) == 0", True),
    ("quantity('1').sub(1).sign() == 0", True),
    ("quantity('-3').sign() == -1", True),
    ("isQuantity('1Gi') && isQuantity('1e3') && isQuantity('.5')", True),
    ("isQuantity('1GiB')", False),
    ("quantity('500m').asInteger() == 0", CELError),
    ("quantity('2k').asInteger() == 2", False),
    ("quantity('1.5').asApproximateFloat() == 1.0", False),
    ("quantity('1M').compareTo(quantity('1Mi')) == 1", False),
    ("quantity('1').add(quantity('1')).compareTo(quantity('3')) == 0", False),
    ("quantity('3').sign() == -1", False),
    ("quantity('5').isInteger()", True),
    # optionals and sets
    ("optional.of(1).hasValue() && optional.of(1).value() == 1", True),
    ("optional.none().hasValue()", False),
    ("optional.none().orValue(5) == 5", True),
    ("optional.none().orValue(5) == 6", False),
    ("optional.of(2).orValue(5) == 2", True),
    ("optional.ofNonZeroValue(0).hasValue()", False),
    ("optional.ofNonZeroValue('x').hasValue()", True),
    ("optional.none().or(optional.of(3)).value() == 3", True),
    ("optional.none().value() == 1", CELError),
    ("sets.contains([1, 2, 3], [1, 3])", True),
    ("sets.contains([1, 2], [3])", False),
    ("sets.equivalent([1, 2, 2], [2, 1])", True),
    ("sets.equivalent([1], [1, 2])", False),
    ("sets.intersects([1, 2], [2, 3])", True),
    ("sets.intersects([1], [2])", False),
    # IP helpers
    ("isIP('10.0.0.1') && isIP('::1')", True),
    ("isIP('10.0.0.300')", False),
    ("isCIDR('10.0.0.0/8')", True),
    ("isCIDR('10.0.0.1')", False),
    # heterogeneous equality as in cel-go
    ("1 == 1.0", True),
    ("1 != 1.0", False),
    ("'1' == 1", False),
    ("[1, 'a', {'k': [true]}] == [1, 'a', {'k': [true]}]", True),
    ("{'a': 1} == {'a': 2}", False),
    ("2 in [1.0, 2.0]", True),
    # standard errors
    ("1 / 0 == 1", CELError),
    ("9223372036854775807 + 1 > 0", CELError),
]


@pytest.mark.parametrize(("expression", "expected"), SHIMS, ids=[s[0] for s in SHIMS])
def test_shim(expression, expected):
    if expected is CELError:
        with pytest.raises(CELError):
            evaluate(expression, None)
    else:
        assert evaluate(expression, None) is expected


SELF_CASES = [
    ("has(self.a)", {"a": 1}, True),
    ("has(self.a)", {"b": 1}, False),
    ("self.all(k, k.startsWith('x'))", {"x1": 1, "x2": 2}, True),
    ("self.exists(x, x > 2)", [1, 2, 3], True),
    ("self.exists_one(x, x > 1)", [1, 2, 3], False),
    ("self.map(x, x * 2) == [2, 4]", [1, 2], True),
    ("self.filter(x, x > 1) == [2]", [1, 2], True),
]


@pytest.mark.parametrize(("rule", "value", "expected"), SELF_CASES, ids=[c[0] for c in SELF_CASES])
def test_standard_macros_on_self(rule, value, expected):
    assert evaluate(rule, value) is expected


@pytest.mark.parametrize(
    ("rule", "value", "schema", "expected"),
    [
        ("type(self) == int", 3, {"type": "integer"}, True),
        ("type(self) == double", 3, {"type": "number"}, True),
        ("self == 3.0", 3, {"type": "number"}, True),
        ("type(self) == int", 3.0, {"type": "integer"}, True),
        ("type(self) == string", "50%", {"x-kubernetes-int-or-string": True}, True),
        ("type(self) == int", 50, {"x-kubernetes-int-or-string": True}, True),
        (
            "self < timestamp('2030-01-01T00:00:00Z')",
            "2024-05-01T10:00:00Z",
            {"type": "string", "format": "date-time"},
            True,
        ),
        ("self > duration('1m')", "90s", {"type": "string", "format": "duration"}, True),
        ("self == b'hi'", "aGk=", {"type": "string", "format": "byte"}, True),
        ("self == 'yesterday'", "yesterday", {"type": "string", "format": "date-time"}, True),
        (
            "self.foo__dash__bar == 1 && self.__namespace__ == 'n'",
            {"foo-bar": 1, "namespace": "n"},
            {
                "type": "object",
                "properties": {"foo-bar": {"type": "integer"}, "namespace": {"type": "string"}},
            },
            True,
        ),
        (
            "size(self) == 2 && self.declared == 1",
            {"declared": 1, "undeclared": 2},
            {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"declared": {"type": "integer"}},
            },
            True,
        ),
        (
            "self['a'].n == 1.0 && type(self['a'].n) == double",
            {"a": {"n": 1}},
            {
                "type": "object",
                "additionalProperties": {"type": "object", "properties": {"n": {"type": "number"}}},
            },
            True,
        ),
    ],
    ids=[
        "integer schema gives int",
        "number schema gives double even for 3",
        "number compares as double",
        "an integral float under an integer schema is an int",
        "int-or-string keeps a string",
        "int-or-string keeps an int",
        "date-time strings are timestamps",
        "duration strings are durations",
        "byte strings are bytes",
        "an unparsable date-time stays a string",
        "property names are escaped like Kubernetes does",
        "preserved undeclared fields count in size() as upstream",
        "additionalProperties values use their schema",
    ],
)
def test_values_are_converted_by_schema(rule, value, schema, expected):
    assert evaluate(rule, value, schema=schema) is expected


def test_a_resource_root_sees_metadata_and_compares_it_whole():
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}}
    schema = {"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}}
    assert evaluate("self.metadata.name == 'n' && self.kind == 'K'", obj, schema=schema, root=True)
    relabelled = {**obj, "metadata": {"name": "n", "labels": {"a": "c"}}}
    assert not evaluate("self == oldSelf", obj, relabelled, schema=schema, root=True)


@pytest.mark.parametrize(
    ("rule", "problems"),
    [
        ("self.model != ''", []),
        ("self.labels.anything == 'x' && self.ctx == oldSelf.ctx", []),
        (
            "!has(self.tools) || self.tools == 'all'",
            ["ERROR: <input>:1:11: undefined field 'tools'", "ERROR: <input>:1:26: undefined field 'tools'"],
        ),
        ("self.ctx.foo == 1", ["ERROR: <input>:1:10: undefined field 'foo'"]),
        ("self.nope == 1", ["ERROR: <input>:1:6: undefined field 'nope'"]),
        ("self.answers.size() > 0", ["ERROR: <input>:1:6: undefined field 'answers'"]),
    ],
    ids=[
        "a declared string is fine",
        "map keys and whole preserved objects are fine",
        "an untyped preserve-unknown-fields property is not exposed to CEL",
        "fields inside a preserved object without properties are not exposed",
        "an undeclared field is undefined",
        "an array of untyped items is not exposed",
    ],
)
def test_undefined_fields_are_found_like_cel_go_type_check(rule, problems):
    schema = {
        "type": "object",
        "properties": {
            "model": {"type": "string"},
            "tools": {"x-kubernetes-preserve-unknown-fields": True},
            "ctx": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "answers": {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}},
        },
    }
    assert cel.undefined_fields(rule, schema) == problems


def test_undefined_fields_at_a_resource_root():
    schema = {"type": "object", "properties": {"metadata": {"type": "object"}}}
    rule = "self.metadata.name == 'a' && self.kind == 'K' && self.metadata.labels.x == 'y'"
    assert cel.undefined_fields(rule, schema, root=True) == ["ERROR: <input>:1:64: undefined field 'labels'"]


def test_old_self_is_bound_only_when_given():
    assert evaluate("self == oldSelf", 1, 1)
    assert not evaluate("self == oldSelf", 1, 2)
    with pytest.raises(CELError, match="oldSelf"):
        evaluate("self == oldSelf", 1)


def test_optional_old_self_is_an_optional():
    assert evaluate("!oldSelf.hasValue() || self >= oldSelf.value()", 1, optional_old_self=True)
    assert evaluate("oldSelf.orValue(0) == 0", 1, NO_OLD, optional_old_self=True)
    assert not evaluate("self >= oldSelf.value()", 1, 2, optional_old_self=True)


def test_compile_is_cached_and_reports_old_self_use():
    program = compile_rule("self == oldSelf")
    assert compile_rule("self == oldSelf") is program
    assert program.uses_old_self
    assert not compile_rule("self > 1").uses_old_self


def test_syntax_errors_are_compile_errors():
    with pytest.raises(CELError) as info:
        compile_rule("self ==")
    assert info.value.compile_error


def test_runtime_errors_read_like_cel_go():
    with pytest.raises(CELError, match="^no such key: missing$"):
        evaluate("self.missing == 1", {"present": 1})
    with pytest.raises(CELError, match="division by zero"):
        evaluate("1 / 0 == 0", None)


def test_a_rule_must_return_a_bool():
    with pytest.raises(CELError, match="bool"):
        evaluate("1 + 1", None)


def test_evaluate_expression_returns_plain_values():
    assert evaluate_expression("'x: ' + string(self.n)", {"self": {"n": 3}}) == "x: 3"
    assert evaluate_expression("object.metadata.name", {"object": {"metadata": {"name": "a"}}}) == "a"
    assert evaluate_expression("[1, 2.5, {'a': true}]", {}) == [1, 2.5, {"a": True}]


def test_from_cel_renders_timestamps_as_rfc3339():
    value = cel.to_cel("2024-05-01T10:00:00Z", {"type": "string", "format": "date-time"})
    assert cel.from_cel(value) == "2024-05-01T10:00:00Z"
