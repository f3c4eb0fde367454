/* SPDX-License-Identifier: MIT */
/*
 * A minimal test harness: assertions that report the expression, the
 * expected and the actual value, and a skip that exits 77 with a reason
 * (meson counts it as skipped).
 *
 *   static void test_foo(void) { CHECK_EQ_U64(f(1), 2); }
 *   int main(void) { RUN(test_foo); return check_done(); }
 *
 * PTD_TEST_ONLY=TEXT in the environment runs only the test functions whose
 * name contains TEXT (the others say "skip"), e.g. to stress one part of
 * a long test program: PTD_TEST_ONLY=snapshot_paced tests/stress.sh ...
 */
#ifndef PTD_TESTS_CHECK_H
#define PTD_TESTS_CHECK_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned check_failures;
static unsigned check_tests;
static const char *check_current;

#define CHECK_FAIL_(fmt, ...)                                                 \
	do {                                                                  \
		fprintf(stderr, "%s:%d: %s: " fmt "\n", __FILE__, __LINE__,   \
			check_current ? check_current : "?", __VA_ARGS__);    \
		check_failures++;                                             \
	} while (0)

#define CHECK(cond)                                                           \
	do {                                                                  \
		if (!(cond))                                                  \
			CHECK_FAIL_("CHECK(%s) failed", #cond);               \
	} while (0)

/* Fatal variant: stop the current test function. */
#define REQUIRE(cond)                                                         \
	do {                                                                  \
		if (!(cond)) {                                                \
			CHECK_FAIL_("REQUIRE(%s) failed", #cond);             \
			return;                                               \
		}                                                             \
	} while (0)

/* REQUIRE for a helper that returns false when it could not do its work. */
#define REQUIRE_OR_FALSE(cond)                                                \
	do {                                                                  \
		if (!(cond)) {                                                \
			CHECK_FAIL_("REQUIRE(%s) failed", #cond);             \
			return false;                                         \
		}                                                             \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                    \
	do {                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		if (a_ != b_)                                                 \
			CHECK_FAIL_("%s == %s: expected %lld, got %lld", #a,  \
				    #b, b_, a_);                              \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                    \
	do {                                                                  \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);              \
		if (a_ != b_)                                                 \
			CHECK_FAIL_("%s == %s: expected 0x%" PRIx64           \
				    ", got 0x%" PRIx64, #a, #b, b_, a_);      \
	} while (0)

#define CHECK_EQ_STR(a, b)                                                    \
	do {                                                                  \
		const char *a_ = (a), *b_ = (b);                              \
		if (!a_ || !b_ || strcmp(a_, b_) != 0)                        \
			CHECK_FAIL_("%s == %s: expected \"%s\", got \"%s\"",  \
				    #a, #b, b_ ? b_ : "(null)",               \
				    a_ ? a_ : "(null)");                      \
	} while (0)

/* Check that string @hay contains @needle. */
#define CHECK_CONTAINS(hay, needle)                                           \
	do {                                                                  \
		const char *h_ = (hay), *n_ = (needle);                       \
		if (!h_ || !strstr(h_, n_))                                   \
			CHECK_FAIL_("%s contains \"%s\": got \"%s\"", #hay,   \
				    n_, h_ ? h_ : "(null)");                  \
	} while (0)

#define RUN(fn)                                                               \
	do {                                                                  \
		unsigned before_ = check_failures;                            \
		const char *only_ = getenv("PTD_TEST_ONLY");                  \
		if (only_ && *only_ && !strstr(#fn, only_)) {                 \
			fprintf(stderr, "skip %s\n", #fn);                    \
			break;                                                \
		}                                                             \
		check_current = #fn;                                          \
		check_tests++;                                                \
		fn();                                                         \
		fprintf(stderr, "%s %s\n",                                    \
			check_failures == before_ ? "ok  " : "FAIL", #fn);    \
		check_current = NULL;                                         \
	} while (0)

/* Skip the whole test program (exit 77) with a reason. */
#define SKIP_ALL(...)                                                         \
	do {                                                                  \
		fprintf(stderr, "SKIP: " __VA_ARGS__);                        \
		fprintf(stderr, "\n");                                        \
		exit(77);                                                     \
	} while (0)

static inline int check_done(void)
{
	fprintf(stderr, "%u test functions, %u failed checks\n", check_tests,
		check_failures);
	return check_failures ? 1 : 0;
}

#endif
