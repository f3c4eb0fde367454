/* SPDX-License-Identifier: MIT */
/*
 * lib/common/json: number literals read exactly past 2^53 (and matched to
 * the right tree item whatever strings and nesting surround them),
 * non-JSON literals refused, integer strings, and the field readers'
 * refusals naming the field's path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/json.h"
#include "common/strutil.h"

#define POISON UINT64_C(0xcdcdcdcdcdcdcdcd)

static struct ptd_json *parse(const char *text)
{
	struct ptd_json *j = NULL;
	struct ptd_diag d = { "" };
	int r = ptd_json_parse(text, strlen(text), "t.json", &j, &d);

	if (r < 0)
		CHECK_FAIL_("parse %s: %d (%s)", text, r, d.msg);
	return j;
}

/* The literal of the number at @path (object keys only) of @j. */
static struct ptd_json_num num_at(const struct ptd_json *j, const char *key)
{
	struct ptd_json_num n = { PTD_JSON_NUM_REAL, true, POISON };
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(ptd_json_root(j),
							   key);

	if (ptd_json_number(j, it, &n) < 0)
		CHECK_FAIL_("%s: no literal", key);
	return n;
}

static void check_int(const struct ptd_json *j, const char *key, bool neg,
		      uint64_t mag)
{
	struct ptd_json_num n = num_at(j, key);

	if (n.kind != PTD_JSON_NUM_INT || n.negative != neg ||
	    n.magnitude != mag)
		CHECK_FAIL_("%s: expected %s%" PRIu64 ", got kind %d %s%"
			    PRIu64, key, neg ? "-" : "", mag, n.kind,
			    n.negative ? "-" : "", n.magnitude);
}

static void check_kind(const struct ptd_json *j, const char *key,
		       enum ptd_json_num_kind kind, bool neg)
{
	struct ptd_json_num n = num_at(j, key);

	CHECK_EQ_INT(n.kind, kind);
	CHECK_EQ_INT(n.negative, neg);
	CHECK_EQ_U64(n.magnitude, 0);
}

static void test_exact_numbers(void)
{
	char big[700];
	struct ptd_json *j = parse(
		"{\"p53\":9007199254740993,\"max\":18446744073709551615,"
		"\"p64\":18446744073709551616,\"tz\":18433473881008870804,"
		"\"neg\":-5,\"nzero\":-0,\"zero\":0,"
		"\"i64min\":-9223372036854775808,"
		"\"negbig\":-18446744073709551616,"
		"\"frac\":1.0,\"exp\":1e3,\"Exp\":1E+3,\"nexp\":-1.5e-3,"
		"\"half\":0.5}");

	REQUIRE(j);
	check_int(j, "p53", false, (1ull << 53) + 1);
	check_int(j, "max", false, UINT64_MAX);
	check_kind(j, "p64", PTD_JSON_NUM_BIG, false);
	check_int(j, "tz", false, 18433473881008870804ull);
	check_int(j, "neg", true, 5);
	check_int(j, "nzero", true, 0);
	check_int(j, "zero", false, 0);
	check_int(j, "i64min", true, 1ull << 63);
	check_kind(j, "negbig", PTD_JSON_NUM_BIG, true);
	check_kind(j, "frac", PTD_JSON_NUM_REAL, false);
	check_kind(j, "exp", PTD_JSON_NUM_REAL, false);
	check_kind(j, "Exp", PTD_JSON_NUM_REAL, false);
	check_kind(j, "nexp", PTD_JSON_NUM_REAL, true);
	check_kind(j, "half", PTD_JSON_NUM_REAL, false);
	ptd_json_free(j);

	/* a 600-digit integer: more than 64 bits, no overflow reading it */
	memset(big, '9', 600);
	memcpy(big, "{\"h\":", 5);
	memcpy(big + 600, "}", 2);
	j = parse(big);
	REQUIRE(j);
	check_kind(j, "h", PTD_JSON_NUM_BIG, false);
	ptd_json_free(j);
}

/* Strings with digits, escaped quotes and backslashes, keys that look like
 * numbers, nesting: each number item still gets its own literal. */
static void test_literal_matching(void)
{
	struct ptd_json *j = parse(
		"\xef\xbb\xbf{\"12\":\"3,4\\\"5\\\\\",\"a\":[1,{\"-7\":"
		"[9007199254740993,\"0x10\",true,null,-2]},2e5],"
		"\"b\":18446744073709551614,\"c\":\"\\u0031\"}");
	const cJSON *a, *inner;
	struct ptd_json_num n;

	REQUIRE(j);
	a = cJSON_GetObjectItemCaseSensitive(ptd_json_root(j), "a");
	REQUIRE(cJSON_GetArraySize(a) == 3);
	REQUIRE(ptd_json_number(j, cJSON_GetArrayItem(a, 0), &n) == 0);
	CHECK(n.kind == PTD_JSON_NUM_INT && !n.negative && n.magnitude == 1);
	inner = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 1),
						 "-7");
	REQUIRE(ptd_json_number(j, cJSON_GetArrayItem(inner, 0), &n) == 0);
	CHECK_EQ_U64(n.magnitude, (1ull << 53) + 1);
	REQUIRE(ptd_json_number(j, cJSON_GetArrayItem(inner, 4), &n) == 0);
	CHECK(n.negative && n.magnitude == 2);
	REQUIRE(ptd_json_number(j, cJSON_GetArrayItem(a, 2), &n) == 0);
	CHECK_EQ_INT(n.kind, PTD_JSON_NUM_REAL);
	check_int(j, "b", false, UINT64_MAX - 1);
	/* not numbers: a string, a boolean, an item of no document */
	CHECK_EQ_INT(ptd_json_number(j, cJSON_GetObjectItemCaseSensitive(
					       ptd_json_root(j), "c"), &n),
		     -EINVAL);
	CHECK_EQ_INT(ptd_json_number(j, cJSON_GetArrayItem(inner, 2), &n),
		     -EINVAL);
	{
		cJSON *other = cJSON_CreateNumber(1);

		CHECK_EQ_INT(ptd_json_number(j, other, &n), -EINVAL);
		cJSON_Delete(other);
	}
	ptd_json_free(j);

	/* what follows the value is not read (as cJSON does) */
	j = parse("{\"a\":5} 7 \"x");
	REQUIRE(j);
	check_int(j, "a", false, 5);
	ptd_json_free(j);
	/* a text that is only a number */
	j = parse("-42");
	REQUIRE(j);
	REQUIRE(ptd_json_number(j, ptd_json_root(j), &n) == 0);
	CHECK(n.negative && n.magnitude == 42);
	ptd_json_free(j);
	ptd_json_free(NULL);
}

static void test_bad_text(void)
{
	static const char *const bad[] = {
		"{\"a\":01}", "[1.]", "[-01]", "[1.e5]", "[1e]", "{", "",
		"[1,]x", "[\"unterminated]",
	};
	struct ptd_json *j = (struct ptd_json *)&j;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ptd_diag d = { "" };
		int r = ptd_json_parse(bad[i], strlen(bad[i]), "t.json", &j,
				       &d);

		if (r != -PTD_EFORMAT)
			CHECK_FAIL_("%s: expected -PTD_EFORMAT, got %d", bad[i],
				    r);
		CHECK_CONTAINS(d.msg, "t.json: not valid JSON (near byte ");
		CHECK(j == (struct ptd_json *)&j);
	}
	CHECK_EQ_INT(ptd_json_parse(NULL, 0, "o", &j, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_json_parse("1", 1, NULL, &j, NULL), -EINVAL);
	CHECK_EQ_INT(ptd_json_parse("1", 1, "o", NULL, NULL), -EINVAL);
	/* only the @len bytes are read */
	REQUIRE(ptd_json_parse("[12345]", 3, "o", &j, NULL) == -PTD_EFORMAT);
}

static void check_str(const char *s, int want_r, uint64_t want_v)
{
	uint64_t v = POISON;
	int r = ptd_json_parse_int_string(s, strlen(s), &v);

	if (r != want_r)
		CHECK_FAIL_("\"%s\": expected %d, got %d", s, want_r, r);
	else if (r == 0 && v != want_v)
		CHECK_FAIL_("\"%s\": expected %" PRIu64 ", got %" PRIu64, s,
			    want_v, v);
	else if (r < 0 && v != POISON)
		CHECK_FAIL_("\"%s\": failed but wrote %" PRIu64, s, v);
}

static void test_int_strings(void)
{
	check_str("0", 0, 0);
	check_str("9007199254740993", 0, (1ull << 53) + 1);
	check_str("18446744073709551615", 0, UINT64_MAX);
	check_str("18433473881008870804", 0, 18433473881008870804ull);
	check_str("0xffffFFFFffffFFFF", 0, UINT64_MAX);
	check_str("0X10", 0, 16);
	check_str("0x00000000000000000000000001", 0, 1);
	check_str("18446744073709551616", -ERANGE, 0);
	check_str("0x10000000000000000", -ERANGE, 0);
	check_str("99999999999999999999999999999999999999999999", -ERANGE, 0);
	check_str("", -EINVAL, 0);
	check_str("0x", -EINVAL, 0);
	check_str("010", -EINVAL, 0);	/* octal to LLDB */
	check_str("00", -EINVAL, 0);
	check_str("0b101", -EINVAL, 0);
	check_str("-1", -EINVAL, 0);
	check_str("+1", -EINVAL, 0);
	check_str(" 1", -EINVAL, 0);
	check_str("1 ", -EINVAL, 0);
	check_str("1e3", -EINVAL, 0);
	check_str("1.0", -EINVAL, 0);
	check_str("0x1g", -EINVAL, 0);
	check_str("9999999999999999999999x", -EINVAL, 0);
}

/* ptd_json_get_u64 on member "v" of @text: the result, the value, a piece
 * of the message. */
static void check_get(const char *text, unsigned flags, uint64_t min,
		      uint64_t max, int want_r, uint64_t want_v,
		      const char *want_msg)
{
	struct ptd_diag d = { "" };
	struct ptd_json *j = parse(text);
	struct ptd_json_reader rd = { j, "t.json", &d };
	uint64_t v = POISON;
	int r;

	if (!j)
		return;
	r = ptd_json_get_u64(&rd, cJSON_GetObjectItemCaseSensitive(
					  ptd_json_root(j), "o"),
			     "x.o", "v", flags, min, max, &v);
	if (r != want_r)
		CHECK_FAIL_("%s: expected %d, got %d (%s)", text, want_r, r,
			    d.msg);
	else if (r == 0 && v != want_v)
		CHECK_FAIL_("%s: expected %" PRIu64 ", got %" PRIu64, text,
			    want_v, v);
	if (r < 0 && v != POISON)
		CHECK_FAIL_("%s: failed but wrote %" PRIu64, text, v);
	if (want_msg)
		CHECK_CONTAINS(d.msg, want_msg);
	if (want_r == -PTD_EFORMAT)
		CHECK_CONTAINS(d.msg, "t.json: x.o.v: ");
	ptd_json_free(j);
}

#define REQ PTD_JSON_REQUIRED
#define STR PTD_JSON_INT_STRING

static void test_get_u64(void)
{
	const uint64_t M = UINT64_MAX;

	check_get("{\"o\":{\"v\":9007199254740993}}", REQ, 0, M, 0,
		  (1ull << 53) + 1, NULL);
	check_get("{\"o\":{\"v\":18446744073709551615}}", REQ, 0, M, 0, M,
		  NULL);
	check_get("{\"o\":{\"v\":18446744073709551616}}", REQ, 0, M,
		  -PTD_EFORMAT, 0, "an integer over 64 bits out of range [0, "
		  "18446744073709551615]");
	check_get("{\"o\":{\"v\":18433473881008870804}}", REQ, 0, M, 0,
		  18433473881008870804ull, NULL);
	check_get("{\"o\":{\"v\":-1}}", REQ, 0, M, -PTD_EFORMAT, 0,
		  "expected a non-negative integer");
	check_get("{\"o\":{\"v\":-18446744073709551616}}", REQ, 0, M,
		  -PTD_EFORMAT, 0, "expected a non-negative integer");
	check_get("{\"o\":{\"v\":-0}}", REQ, 0, M, 0, 0, NULL);
	check_get("{\"o\":{\"v\":1e3}}", REQ, 0, M, -PTD_EFORMAT, 0,
		  "expected an integer, not a fraction or an exponent");
	check_get("{\"o\":{\"v\":2.0}}", REQ, 0, M, -PTD_EFORMAT, 0,
		  "not a fraction or an exponent");
	check_get("{\"o\":{\"v\":256}}", REQ, 0, 255, -PTD_EFORMAT, 0,
		  "256 out of range [0, 255]");
	check_get("{\"o\":{\"v\":0}}", REQ, 1, 5, -PTD_EFORMAT, 0,
		  "0 out of range [1, 5]");
	check_get("{\"o\":{\"v\":5}}", REQ, 1, 5, 0, 5, NULL);
	/* absent, null */
	check_get("{\"o\":{}}", REQ, 0, M, -PTD_EFORMAT, 0, "x.o.v: missing");
	check_get("{\"o\":{}}", 0, 0, M, -ENOENT, 0, NULL);
	check_get("{\"o\":{\"v\":null}}", PTD_JSON_NULL_ABSENT, 0, M, -ENOENT,
		  0, NULL);
	check_get("{\"o\":{\"v\":null}}", 0, 0, M, -PTD_EFORMAT, 0,
		  "x.o.v: expected an integer");
	/* strings: only with PTD_JSON_INT_STRING */
	check_get("{\"o\":{\"v\":\"5\"}}", REQ, 0, M, -PTD_EFORMAT, 0,
		  "x.o.v: expected an integer");
	check_get("{\"o\":{\"v\":\"18433473881008870804\"}}", STR, 0, M, 0,
		  18433473881008870804ull, NULL);
	check_get("{\"o\":{\"v\":\"0xffffffffffffffff\"}}", STR, 0, M, 0, M,
		  NULL);
	check_get("{\"o\":{\"v\":\"0x10000000000000000\"}}", STR, 0, M,
		  -PTD_EFORMAT, 0, "\"0x10000000000000000\" out of range");
	check_get("{\"o\":{\"v\":\"0x100\"}}", STR, 0, 255, -PTD_EFORMAT, 0,
		  "256 out of range [0, 255]");
	check_get("{\"o\":{\"v\":\"010\"}}", STR, 0, M, -PTD_EFORMAT, 0,
		  "\"010\" is not a decimal or 0x-hex integer (a leading 0");
	check_get("{\"o\":{\"v\":\"1e3\"}}", STR, 0, M, -PTD_EFORMAT, 0,
		  "\"1e3\" is not a decimal or 0x-hex integer");
	check_get("{\"o\":{\"v\":\"\"}}", STR, 0, M, -PTD_EFORMAT, 0,
		  "\"\" is not a decimal");
	check_get("{\"o\":{\"v\":true}}", STR, 0, M, -PTD_EFORMAT, 0,
		  "expected an integer or an integer string");
	check_get("{\"o\":{\"v\":[1]}}", REQ, 0, M, -PTD_EFORMAT, 0,
		  "expected an integer");
}

static void test_get_others(void)
{
	struct ptd_diag d = { "" };
	struct ptd_json *j = parse(
		"{\"s\":\"x\",\"e\":\"\",\"n\":null,\"o\":{},\"a\":[1,2,3],"
		"\"i\":4}");
	struct ptd_json_reader rd = { j, "t.json", &d };
	const cJSON *root = ptd_json_root(j), *it = NULL;
	const char *s = NULL;
	char path[PTD_JSON_PATH_MAX];
	size_t n = 0;

	REQUIRE(j);
	CHECK_EQ_INT(ptd_json_get_str(&rd, root, "", "s", REQ, &s), 0);
	CHECK_EQ_STR(s, "x");
	CHECK_EQ_INT(ptd_json_get_str(&rd, root, "", "e", PTD_JSON_NONEMPTY,
				      &s), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: e: empty string");
	CHECK_EQ_INT(ptd_json_get_str(&rd, root, "", "e", 0, &s), 0);
	CHECK_EQ_STR(s, "");
	CHECK_EQ_INT(ptd_json_get_str(&rd, root, "", "i", 0, &s),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: i: expected a string");
	CHECK_EQ_INT(ptd_json_get_str(&rd, root, "", "n", PTD_JSON_NULL_ABSENT,
				      &s), -ENOENT);
	CHECK_EQ_INT(ptd_json_get_str(&rd, root, "", "n", 0, &s),
		     -PTD_EFORMAT);
	CHECK_EQ_INT(ptd_json_get_object(&rd, root, "", "o", REQ, &it), 0);
	CHECK(cJSON_IsObject(it));
	CHECK_EQ_INT(ptd_json_get_object(&rd, root, "p", "a", REQ, &it),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: p.a: expected an object");
	CHECK_EQ_INT(ptd_json_get_array(&rd, root, "", "a", REQ, 3, &it, &n),
		     0);
	CHECK_EQ_U64(n, 3);
	CHECK_EQ_INT(ptd_json_get_array(&rd, root, "", "a", REQ, 2, &it, &n),
		     -PTD_ELIMIT);
	CHECK_CONTAINS(d.msg, "t.json: a: 3 elements, more than the 2 allowed");
	CHECK_EQ_INT(ptd_json_get_array(&rd, root, "", "o", REQ, 2, &it, &n),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "o: expected an array");
	CHECK_EQ_INT(ptd_json_get_array(&rd, root, "", "zz", REQ, 2, &it, &n),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: zz: missing");
	CHECK_EQ_INT(ptd_json_get_array(&rd, root, "", "zz", 0, 2, &it, &n),
		     -ENOENT);
	CHECK_EQ_STR(ptd_json_path(path, "", "k"), "k");
	CHECK_EQ_STR(ptd_json_path(path, "a[1]", "k"), "a[1].k");
	CHECK_EQ_STR(ptd_json_path_index(path, "", "k", 2), "k[2]");
	CHECK_EQ_STR(ptd_json_path_index(path, "a", "k", 0), "a.k[0]");
	ptd_json_free(j);
}

#define WHOLE (PTD_JSON_REQUIRED | PTD_JSON_INT_WHOLE)
#define HEX (PTD_JSON_REQUIRED | PTD_JSON_HEX)
#define LIMIT (PTD_JSON_REQUIRED | PTD_JSON_LIMIT)

/* PTD_JSON_INT_WHOLE: a literal with a fraction or an exponent is read
 * when its value is a whole number, exactly (as cJSON writes 10^15:
 * "1e+15"), and refused as a fraction otherwise; the literal itself
 * stays PTD_JSON_NUM_REAL with no magnitude. */
static void test_whole_numbers(void)
{
	const uint64_t M = UINT64_MAX;
	struct ptd_json *j;

	check_get("{\"o\":{\"v\":1e3}}", WHOLE, 0, M, 0, 1000, NULL);
	check_get("{\"o\":{\"v\":1E+3}}", WHOLE, 0, M, 0, 1000, NULL);
	check_get("{\"o\":{\"v\":2.0}}", WHOLE, 0, M, 0, 2, NULL);
	check_get("{\"o\":{\"v\":1e+15}}", WHOLE, 0, M, 0, 1000000000000000ull,
		  NULL);
	check_get("{\"o\":{\"v\":2.50e1}}", WHOLE, 0, M, 0, 25, NULL);
	check_get("{\"o\":{\"v\":0.05e2}}", WHOLE, 0, M, 0, 5, NULL);
	check_get("{\"o\":{\"v\":100e-2}}", WHOLE, 0, M, 0, 1, NULL);
	check_get("{\"o\":{\"v\":10.00}}", WHOLE, 0, M, 0, 10, NULL);
	check_get("{\"o\":{\"v\":0e-99999}}", WHOLE, 0, M, 0, 0, NULL);
	check_get("{\"o\":{\"v\":-0.0}}", WHOLE, 0, M, 0, 0, NULL);
	check_get("{\"o\":{\"v\":1.8446744073709551615e19}}", WHOLE, 0, M, 0,
		  M, NULL);
	check_get("{\"o\":{\"v\":1.8446744073709551616e19}}", WHOLE, 0, M,
		  -PTD_EFORMAT, 0, "an integer over 64 bits out of range");
	check_get("{\"o\":{\"v\":1e300}}", WHOLE, 0, M, -PTD_EFORMAT, 0,
		  "an integer over 64 bits out of range");
	check_get("{\"o\":{\"v\":1e999999999999}}", WHOLE, 0, M, -PTD_EFORMAT,
		  0, "an integer over 64 bits out of range");
	check_get("{\"o\":{\"v\":1.5}}", WHOLE, 0, M, -PTD_EFORMAT, 0,
		  "x.o.v: expected an integer, not a fraction");
	check_get("{\"o\":{\"v\":1e-1}}", WHOLE, 0, M, -PTD_EFORMAT, 0,
		  "expected an integer, not a fraction");
	check_get("{\"o\":{\"v\":1.0000000000000000001}}", WHOLE, 0, M,
		  -PTD_EFORMAT, 0, "expected an integer, not a fraction");
	check_get("{\"o\":{\"v\":-1e2}}", WHOLE, 0, M, -PTD_EFORMAT, 0,
		  "expected a non-negative integer");
	check_get("{\"o\":{\"v\":2e3}}", WHOLE, 0, 1999, -PTD_EFORMAT, 0,
		  "2000 out of range [0, 1999]");
	/* without the flag: refused, whatever the value */
	check_get("{\"o\":{\"v\":2e3}}", REQ, 0, M, -PTD_EFORMAT, 0,
		  "not a fraction or an exponent");

	j = parse("{\"w\":1e3,\"f\":0.5,\"b\":1e20}");
	REQUIRE(j);
	{
		struct ptd_json_num n = num_at(j, "w");

		CHECK(n.kind == PTD_JSON_NUM_REAL && n.whole && !n.whole_big);
		CHECK_EQ_U64(n.whole_magnitude, 1000);
		CHECK_EQ_U64(n.magnitude, 0);
		n = num_at(j, "f");
		CHECK(n.kind == PTD_JSON_NUM_REAL && !n.whole);
		n = num_at(j, "b");
		CHECK(n.kind == PTD_JSON_NUM_REAL && n.whole && n.whole_big);
	}
	ptd_json_free(j);
}

/* PTD_JSON_LIMIT: over the maximum is ptd's limit, not bad input. */
static void test_limits(void)
{
	check_get("{\"o\":{\"v\":11}}", LIMIT, 0, 10, -PTD_ELIMIT, 0,
		  "t.json: x.o.v: 11 is over the limit 10");
	check_get("{\"o\":{\"v\":18446744073709551616}}", LIMIT, 0, 10,
		  -PTD_ELIMIT, 0, "an integer over 64 bits is over the limit");
	check_get("{\"o\":{\"v\":1}}", LIMIT, 2, 10, -PTD_EFORMAT, 0,
		  "1 out of range [2, 10]");
	check_get("{\"o\":{\"v\":10}}", LIMIT, 0, 10, 0, 10, NULL);
}

/* PTD_JSON_HEX: a "0x" string and nothing else. */
static void test_hex(void)
{
	const uint64_t M = UINT64_MAX;

	check_get("{\"o\":{\"v\":\"0x10\"}}", HEX, 0, M, 0, 16, NULL);
	check_get("{\"o\":{\"v\":\"0XfF\"}}", HEX, 0, M, 0, 255, NULL);
	check_get("{\"o\":{\"v\":\"0xffffffffffffffff\"}}", HEX, 0, M, 0, M,
		  NULL);
	check_get("{\"o\":{\"v\":\"16\"}}", HEX, 0, M, -PTD_EFORMAT, 0,
		  "x.o.v: expected a hex string \"0x...\" (64 bits at most), "
		  "not \"16\"");
	check_get("{\"o\":{\"v\":\"0x\"}}", HEX, 0, M, -PTD_EFORMAT, 0,
		  "not \"0x\"");
	check_get("{\"o\":{\"v\":\"0x1g\"}}", HEX, 0, M, -PTD_EFORMAT, 0,
		  "not \"0x1g\"");
	check_get("{\"o\":{\"v\":\"0x10000000000000000\"}}", HEX, 0, M,
		  -PTD_EFORMAT, 0, "(64 bits at most), not \"0x1000");
	check_get("{\"o\":{\"v\":16}}", HEX, 0, M, -PTD_EFORMAT, 0,
		  "expected a hex string \"0x...\" (64 bits at most), not a "
		  "number");
	check_get("{\"o\":{\"v\":\"0x100\"}}", HEX, 0, 255, -PTD_EFORMAT, 0,
		  "0x100 out of range [0, 255]");
	check_get("{\"o\":{}}", PTD_JSON_HEX, 0, M, -ENOENT, 0, NULL);
}

/* Strings with a length limit, copies, booleans, item readers, the keys
 * an object may have, and how a message names the field. */
static void test_more_getters(void)
{
	struct ptd_diag d = { "" };
	struct ptd_json *j = parse(
		"{\"s\":\"abc\",\"t\":true,\"f\":false,\"n\":1,\"z\":null,"
		"\"a\":[\"x\",2],\"o\":{\"k\":1,\"l\":2,\"k\":3},"
		"\"p\":{\"k\":1,\"l\":2}}");
	struct ptd_json_reader rd = { j, "t.json", &d };
	struct ptd_json_reader bare = { j, "", &d };
	static const char *const kl[] = { "k", "l", NULL };
	static const char *const k[] = { "k", NULL };
	static const char *const top[] = { "s", "t", "f", "n", "z", "a", "o",
					   "p", NULL };
	const cJSON *root = ptd_json_root(j), *a;
	const char *s = NULL;
	char *dup = NULL;
	bool b = false;
	uint64_t v = POISON;

	REQUIRE(j);
	CHECK_EQ_INT(ptd_json_get_strn(&rd, root, "", "s", REQ, 3, &s), 0);
	CHECK_EQ_STR(s, "abc");
	s = NULL;
	CHECK_EQ_INT(ptd_json_get_strn(&rd, root, "", "s", REQ, 2, &s),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: s: longer than 2 bytes");
	CHECK(s == NULL);
	CHECK_EQ_INT(ptd_json_get_strn(&rd, root, "", "s", LIMIT, 2, &s),
		     -PTD_ELIMIT);
	CHECK_EQ_INT(ptd_json_get_strdup(&rd, root, "p", "s", REQ, 8, &dup),
		     0);
	CHECK_EQ_STR(dup, "abc");
	free(dup);
	dup = NULL;
	CHECK_EQ_INT(ptd_json_get_strdup(&rd, root, "p", "n", REQ, 8, &dup),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: p.n: expected a string, not a number");
	CHECK(dup == NULL);
	CHECK_EQ_INT(ptd_json_get_strdup(&rd, root, "", "q", 0, 8, &dup),
		     -ENOENT);

	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "t", REQ, &b), 0);
	CHECK(b);
	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "f", REQ, &b), 0);
	CHECK(!b);
	b = true;
	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "n", REQ, &b),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: n: expected a boolean, not a number");
	CHECK(b);
	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "q", REQ, &b),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: q: missing");
	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "q", 0, &b), -ENOENT);
	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "z",
				       PTD_JSON_NULL_ABSENT, &b), -ENOENT);
	CHECK_EQ_INT(ptd_json_get_bool(&rd, root, "", "z", 0, &b),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: z: expected a boolean, not null");

	/* items of an array, by their path */
	a = cJSON_GetObjectItemCaseSensitive(root, "a");
	CHECK_EQ_INT(ptd_json_read_str(&rd, cJSON_GetArrayItem(a, 0), "a[0]",
				       REQ, 1, &s), 0);
	CHECK_EQ_STR(s, "x");
	CHECK_EQ_INT(ptd_json_read_u64(&rd, cJSON_GetArrayItem(a, 1), "a[1]",
				       REQ, 0, 5, &v), 0);
	CHECK_EQ_U64(v, 2);
	CHECK_EQ_INT(ptd_json_read_u64(&rd, cJSON_GetArrayItem(a, 0), "a[0]",
				       REQ, 0, 5, &v), -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: a[0]: expected an integer, not a string");
	CHECK_EQ_INT(ptd_json_read_u64(&rd, NULL, "a[2]", REQ, 0, 5, &v),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: a[2]: missing");
	CHECK_EQ_INT(ptd_json_read_bool(&rd, NULL, "a[2]", 0, &b), -ENOENT);

	/* keys: unknown ones and repeated ones refused, by path */
	CHECK_EQ_INT(ptd_json_check_keys(&rd, root, "", top), 0);
	CHECK_EQ_INT(ptd_json_check_keys(&rd,
					 cJSON_GetObjectItemCaseSensitive(
						 root, "p"), "p", k),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: p: unknown field \"l\"");
	CHECK_EQ_INT(ptd_json_check_keys(&rd,
					 cJSON_GetObjectItemCaseSensitive(
						 root, "p"), "p", kl), 0);
	CHECK_EQ_INT(ptd_json_check_keys(&rd,
					 cJSON_GetObjectItemCaseSensitive(
						 root, "o"), "o", kl),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "t.json: o.k: given twice");
	CHECK_EQ_INT(ptd_json_check_keys(&rd, root, "", k), -PTD_EFORMAT);
	CHECK_EQ_STR(d.msg, "t.json: unknown field \"s\"");

	/* an empty origin or path leaves its part out */
	CHECK_EQ_INT(ptd_json_get_u64(&bare, root, "", "s", REQ, 0, 1, &v),
		     -PTD_EFORMAT);
	CHECK_EQ_STR(d.msg, "s: expected an integer, not a string");
	CHECK_EQ_INT(ptd_json_bad(&rd, "", "what"), -PTD_EFORMAT);
	CHECK_EQ_STR(d.msg, "t.json: what");
	CHECK_EQ_INT(ptd_json_badf(&rd, -PTD_EVERSION, "p.q", "%d not %s", 7,
				   "ok"), -PTD_EVERSION);
	CHECK_EQ_STR(d.msg, "t.json: p.q: 7 not ok");
	CHECK_EQ_STR(ptd_json_type_name(NULL), "nothing");
	CHECK_EQ_STR(ptd_json_type_name(root), "an object");
	CHECK_EQ_STR(ptd_json_type_name(a), "an array");
	ptd_json_free(j);
}

/* The head of ptd's own formats: format first, then version. */
static void check_format(const char *text, int want_r, const char *want_msg)
{
	struct ptd_diag d = { "" };
	struct ptd_json *j = parse(text);
	struct ptd_json_reader rd = { j, "m.json", &d };

	if (!j)
		return;
	CHECK_EQ_INT(ptd_json_check_format(&rd, ptd_json_root(j), "ptd-x", 2),
		     want_r);
	if (want_msg)
		CHECK_EQ_STR(d.msg, want_msg);
	ptd_json_free(j);
}

static void test_check_format(void)
{
	check_format("{\"format\":\"ptd-x\",\"version\":2,\"more\":1}", 0,
		     NULL);
	check_format("{\"version\":2,\"format\":\"ptd-x\"}", 0, NULL);
	check_format("{\"format\":\"ptd-x\",\"version\":2e0}", 0, NULL);
	check_format("[1]", -PTD_EFORMAT, "m.json: not a JSON object");
	check_format("{\"version\":2}", -PTD_EFORMAT, "m.json: format: missing");
	check_format("{\"format\":\"zip\",\"version\":\"x\"}", -PTD_EFORMAT,
		     "m.json: format: \"zip\" is not \"ptd-x\"");
	check_format("{\"format\":7}", -PTD_EFORMAT,
		     "m.json: format: expected a string, not a number");
	check_format("{\"format\":\"ptd-x\"}", -PTD_EFORMAT,
		     "m.json: version: missing");
	check_format("{\"format\":\"ptd-x\",\"version\":1.5}", -PTD_EFORMAT,
		     "m.json: version: expected an integer, not a fraction");
	check_format("{\"format\":\"ptd-x\",\"version\":3}", -PTD_EVERSION,
		     "m.json: version: 3 not supported (only 2)");
}

/* ptd_json_parse_all(): only white space after the value; and no text
 * with a string that holds \u0000, which cJSON would cut short. */
static void test_parse_all_and_nul(void)
{
	static const char *const nul[] = {
		"{\"a\":\"x\\u0000y\"}", "[\"\\u0000\"]",
		"{\"\\u0000\":1}", "{\"a\":\"..\\u0000/x\"}",
	};
	struct ptd_json *j = NULL;
	struct ptd_diag d = { "" };

	CHECK_EQ_INT(ptd_json_parse_all("{} \t\r\n", 6, "r", &j, &d), 0);
	ptd_json_free(j);
	j = (struct ptd_json *)&j;
	CHECK_EQ_INT(ptd_json_parse_all("{} x", 4, "r", &j, &d),
		     -PTD_EFORMAT);
	CHECK_EQ_STR(d.msg, "r: data after the JSON value (at byte 3)");
	CHECK_EQ_INT(ptd_json_parse_all("{}{}", 4, "r", &j, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "(at byte 2)");
	CHECK_EQ_INT(ptd_json_parse_all("{} \0", 4, "r", &j, &d),
		     -PTD_EFORMAT);
	CHECK_CONTAINS(d.msg, "(at byte 3)");
	CHECK(j == (struct ptd_json *)&j);
	/* ptd_json_parse() does not look past the value */
	CHECK_EQ_INT(ptd_json_parse("{} x", 4, "r", &j, &d), 0);
	ptd_json_free(j);

	for (size_t i = 0; i < PTD_ARRAY_SIZE(nul); i++) {
		j = (struct ptd_json *)&j;
		d.msg[0] = 0;
		if (ptd_json_parse(nul[i], strlen(nul[i]), "t.json", &j, &d) !=
		    -PTD_EFORMAT)
			CHECK_FAIL_("%s: not refused", nul[i]);
		CHECK_CONTAINS(d.msg, "t.json: a string holds \\u0000");
		CHECK(j == (struct ptd_json *)&j);
	}
	/* an escaped backslash before "u0000" is no NUL */
	j = parse("{\"a\":\"\\\\u0000\",\"b\":\"\\u0001\"}");
	REQUIRE(j);
	CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(ptd_json_root(j),
						      "a")->valuestring,
		     "\\u0000");
	ptd_json_free(j);
}

/* Each number item of the tree, checked against cJSON's double. */
static void check_items(const struct ptd_json *j, const cJSON *it,
			const char *text, unsigned *nints)
{
	for (; it; it = it->next) {
		struct ptd_json_num n;

		if (cJSON_IsNumber(it)) {
			if (ptd_json_number(j, it, &n) < 0) {
				CHECK_FAIL_("%s: a number without literal",
					    text);
				return;
			}
			if (n.kind == PTD_JSON_NUM_INT &&
			    n.magnitude < (1ull << 53)) {
				double v = (double)n.magnitude;

				if ((n.negative ? -v : v) != it->valuedouble)
					CHECK_FAIL_("%s: literal %s%" PRIu64
						    ", cJSON %g", text,
						    n.negative ? "-" : "",
						    n.magnitude,
						    it->valuedouble);
				(*nints)++;
			}
		}
		if (cJSON_IsArray(it) || cJSON_IsObject(it))
			check_items(j, it->child, text, nints);
	}
}

/* Random texts of JSON's characters: whatever cJSON accepts, ptd_json
 * accepts too unless a number literal is not JSON, and every number item
 * gets the literal that is its value; nothing else (no crash, no
 * "disagree"). */
static void test_random_texts(void)
{
	static const char alpha[] = "{}[]\"\":,,,-0123456789.eE+ \\ntrue";
	static const char *const words[] = { "true", "false", "null", "\"a\"",
					     "\"\\\"1\"", "\"\\\\\"", "12",
					     "-3", "0.5", "1e2",
					     "18446744073709551616" };
	unsigned seed = 12345, accepted = 0, refused_num = 0, nints = 0;
	unsigned nested = 0, failures_before = check_failures;

	for (unsigned iter = 0; iter < 200000; iter++) {
		char text[64];
		/* half of them in an array: scalars alone parse too often */
		size_t len = iter % 2, want = 1 + (seed >> 16) % 40;
		struct ptd_json *j = NULL;
		struct ptd_diag d = { "" };
		cJSON *c;
		int r;

		if (check_failures > failures_before + 5)
			break;	/* enough to see what is wrong */

		while (len < want) {
			seed = seed * 1103515245u + 12345u;
			if ((seed >> 16) % 4 == 0) {
				const char *w = words[(seed >> 20) %
						      PTD_ARRAY_SIZE(words)];
				size_t wl = strlen(w);

				if (len + wl >= sizeof(text))
					break;
				memcpy(text + len, w, wl);
				len += wl;
			} else {
				text[len++] = alpha[(seed >> 20) %
						    (sizeof(alpha) - 1)];
			}
		}
		text[0] = iter % 2 ? '[' : text[0];
		text[len] = 0;
		c = cJSON_ParseWithLength(text, len);
		r = ptd_json_parse(text, len, "r", &j, &d);
		if (!c) {
			CHECK(r == -PTD_EFORMAT);
			continue;
		}
		cJSON_Delete(c);
		if (r < 0) {
			CHECK_EQ_INT(r, -PTD_EFORMAT);
			if (!strstr(d.msg, "a malformed number"))
				CHECK_FAIL_("%s: %s", text, d.msg);
			refused_num++;
			continue;
		}
		accepted++;
		nested += !cJSON_IsNumber(ptd_json_root(j)) &&
			  ptd_json_root(j)->child != NULL;
		check_items(j, ptd_json_root(j), text, &nints);
		ptd_json_free(j);
	}
	fprintf(stderr, "  %u accepted (%u not empty arrays or objects), %u "
		"refused for a number, %u integers checked\n", accepted,
		nested, refused_num, nints);
	CHECK(nested > 1000 && refused_num > 10 && nints > 1000);
}

int main(void)
{
	RUN(test_exact_numbers);
	RUN(test_literal_matching);
	RUN(test_bad_text);
	RUN(test_int_strings);
	RUN(test_get_u64);
	RUN(test_get_others);
	RUN(test_whole_numbers);
	RUN(test_limits);
	RUN(test_hex);
	RUN(test_more_getters);
	RUN(test_parse_all_and_nul);
	RUN(test_check_format);
	RUN(test_random_texts);
	return check_done();
}
