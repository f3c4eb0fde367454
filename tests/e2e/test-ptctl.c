/* SPDX-License-Identifier: MIT */
/*
 * ptctl as a user runs it: the JSON stream of `ptctl trace` and `ptctl
 * decode` (every line parsed back with cJSON), `ptctl verify`, and exit
 * codes and messages for bad input.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "e2e/run-cmd.h"
#include "unit/ptenc.h"
#include "unit/skl014.h"
#include "unit/lldb-unclaimed.h"
#include "unit/fieldcmp.h"
#include "common/fileio.h"
#include "common/strutil.h"
#include "swpt/capture.h"

static char ptctl[512];
static const char *progs;
static char workdir[256];

/* Run ptctl with @args (NULL-terminated) to its end. */
static struct run run_ptctl(const char *const *args)
{
	return run_cmd(ptctl, args, workdir);
}

struct stream_info {
	unsigned lines, insns, blocks, events, errors;
	bool hello_first, bye_last, all_valid, hex_ok;
	uint64_t bye_insns, bye_errors;
	unsigned in_module;	/* insns whose module contains a name */
};

static uint64_t hex_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsString(v) || strncmp(v->valuestring, "0x", 2))
		return UINT64_MAX;
	return strtoull(v->valuestring + 2, NULL, 16);
}

/* Parse every line of @out; check the stream's shape. */
static struct stream_info parse_stream(const char *out, const char *module)
{
	struct stream_info si = { 0 };
	const char *p = out;

	si.all_valid = si.hex_ok = true;
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		cJSON *o = cJSON_ParseWithLength(p, len);
		const cJSON *type = o ? o->child : NULL;

		si.lines++;
		if (!o || !type || strcmp(type->string, "type") ||
		    !cJSON_IsString(type)) {
			si.all_valid = false;
			fprintf(stderr, "bad line: %.*s\n", (int)len, p);
		} else {
			const char *t = type->valuestring;
			bool last = !nl || !nl[1];

			if (si.lines == 1)
				si.hello_first = !strcmp(t, "hello");
			if (last && !strcmp(t, "bye")) {
				si.bye_last = true;
				si.bye_insns = hex_of(o, "insns");
				si.bye_errors = hex_of(o, "errors");
			}
			if (!strcmp(t, "insn")) {
				const cJSON *m = cJSON_GetObjectItem(o,
								     "module");

				si.insns++;
				if (hex_of(o, "ip") == UINT64_MAX)
					si.hex_ok = false;
				if (module && cJSON_IsString(m) &&
				    strstr(m->valuestring, module))
					si.in_module++;
			} else if (!strcmp(t, "block")) {
				si.blocks++;
			} else if (!strcmp(t, "event")) {
				si.events++;
			} else if (!strcmp(t, "error")) {
				si.errors++;
			}
		}
		cJSON_Delete(o);
		p = nl ? nl + 1 : NULL;
	}
	return si;
}

/* --start entry: the first instruction streamed is the program's own,
 * not the dynamic loader's. */
static void test_trace_from_entry(void)
{
	char prog[512];
	const char *args[] = { "trace", "--start", "entry", "--", prog, NULL };
	struct run r;
	const char *first;
	char *eol;

	(void)snprintf(prog, sizeof(prog), "%s/prog-fnptr", progs);
	r = run_ptctl(args);
	CHECK_EQ_INT(r.status, 0);
	REQUIRE(r.out);
	first = strstr(r.out, "\"type\":\"insn\"");
	REQUIRE(first);
	eol = strchr(first, '\n');
	if (eol)
		*eol = '\0';
	CHECK_CONTAINS(first, "/prog-fnptr\"");
	CHECK(strstr(first, "ld-linux") == NULL);
	run_free(&r);
}

static void test_trace_stream(void)
{
	char prog[512];
	const char *args[] = { "trace", "--", prog, NULL };
	struct run r;
	struct stream_info si;

	(void)snprintf(prog, sizeof(prog), "%s/prog-fnptr", progs);
	r = run_ptctl(args);
	CHECK_EQ_INT(r.status, 0);
	REQUIRE(r.out);
	si = parse_stream(r.out, "prog-fnptr");
	CHECK(si.all_valid);
	CHECK(si.hex_ok);
	CHECK(si.hello_first);
	CHECK(si.bye_last);
	CHECK(si.insns > 1000);
	CHECK(si.events > 0);
	CHECK_EQ_INT(si.errors, 0);
	CHECK_EQ_U64(si.bye_insns, si.insns);
	CHECK(si.in_module > 100);
	CHECK_CONTAINS(r.err, "software PT source");
	run_free(&r);
}

/* PTD_FIELD_BIT()s of a --fields list, with type. */
static uint32_t fields_of(const char *list)
{
	char buf[256], *save = NULL, *tok;
	uint32_t m = PTD_FIELD_BIT(PTD_FIELD_TYPE);

	(void)snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		m |= PTD_FIELD_BIT(ptd_field_parse(tok));
	return m;
}

/* Projected records are the full records restricted to their fields, on
 * both decoder paths, insn and block records, for the capture in @dir. */
static void check_fields(const char *dir)
{
	static const char *const sets[] = {
		"ip,tid", "tid,ip,flags", "module,offset,iclass,raw",
		"pid,size,mode,isid,end_ip,ninsn,tsc,time,wall", "type",
	};
	static const char *const paths[] = { "insn", "block" };

	for (size_t p = 0; p < 3; p++) {
		const char *path = paths[p ? 1 : 0];
		const char *recs = p == 2 ? "insn,block,event,error"
					  : "insn,event,error";
		const char *full_args[] = { "decode", "--path", path,
					    "--records", recs, dir, NULL };
		struct run full = run_ptctl(full_args);

		CHECK_EQ_INT(full.status, 0);
		for (size_t i = 0; full.out && i < PTD_ARRAY_SIZE(sets); i++) {
			const char *args[] = { "decode", "--path", path,
					       "--records", recs, "--fields",
					       sets[i], dir, NULL };
			struct run r = run_ptctl(args);
			size_t lines = 0;

			check_current = sets[i];
			CHECK_EQ_INT(r.status, 0);
			CHECK(r.out && fieldcmp_stream(full.out, full.out_len,
						       r.out, r.out_len,
						       fields_of(sets[i]),
						       &lines));
			CHECK(lines > 1000);
			/* ip and tid: ~40 bytes an instruction, not ~180 */
			if (i == 0)
				CHECK(r.out_len * 3 < full.out_len);
			run_free(&r);
		}
		check_current = "test_capture_decode_verify";
		run_free(&full);
	}
}

static void test_capture_decode_verify(void)
{
	char prog[512], dir[300];
	const char *trace[] = { "trace", "--out", dir, "--no-decode",
				"--quiet-target", "--", prog, NULL };
	const char *verify[] = { "verify", dir, NULL };
	const char *dec_insn[] = { "decode", "--path", "insn", dir, NULL };
	const char *dec_blk[] = { "decode", "--path", "block", dir, NULL };
	const char *dec_blocks[] = { "decode", "--records", "block,error",
				     dir, NULL };
	struct run r, a, b;
	struct stream_info si;

	(void)snprintf(prog, sizeof(prog), "%s/prog-jumptable", progs);
	(void)snprintf(dir, sizeof(dir), "%s/jt", workdir);
	r = run_ptctl(trace);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);

	r = run_ptctl(verify);
	CHECK_EQ_INT(r.status, 0);
	CHECK_CONTAINS(r.out, "verified");
	run_free(&r);

	/* Both decoder paths print byte-identical streams. */
	a = run_ptctl(dec_insn);
	b = run_ptctl(dec_blk);
	CHECK_EQ_INT(a.status, 0);
	CHECK_EQ_INT(b.status, 0);
	CHECK(a.out && b.out && a.out_len == b.out_len &&
	      !memcmp(a.out, b.out, a.out_len));
	run_free(&a);
	run_free(&b);

	check_fields(dir);

	r = run_ptctl(dec_blocks);
	CHECK_EQ_INT(r.status, 0);
	si = parse_stream(r.out, NULL);
	CHECK(si.all_valid);
	CHECK(si.blocks > 100);
	CHECK_EQ_INT(si.insns, 0);
	run_free(&r);

	/* A garbage line in the map timeline: refused, naming file and
	 * line. */
	char tl[400];
	FILE *f;

	(void)snprintf(tl, sizeof(tl), "%s/timeline.jsonl", dir);
	f = fopen(tl, "ae");
	REQUIRE(f);
	fputs("7f00-7f10 r-xp garbage\n", f);
	fclose(f);
	r = run_ptctl(dec_insn);
	CHECK_EQ_INT(r.status, 2);
	CHECK_CONTAINS(r.err, "timeline.jsonl:");
	run_free(&r);
}

/* Raw input as ptxed takes it: only the program's own ELF, so code in
 * ld.so and libc is missing: error records, decoding goes on, exit 3. */
/* What an input says of itself as a whole (input.h notice) is printed:
 * an LLDB per-CPU bundle whose bytes no thread's run claims. */
static void test_decode_notice(void)
{
	char dir[300];
	const char *dec[] = { "decode", dir, NULL };
	struct run r;

	(void)snprintf(dir, sizeof(dir), "%s/lldb-unclaimed", workdir);
	REQUIRE(lldb_unclaimed_bundle(dir));
	r = run_ptctl(dec);
	CHECK_EQ_INT(r.status, 0);
	CHECK_CONTAINS(r.err ? r.err : "", "ptctl: note: ");
	CHECK_CONTAINS(r.err ? r.err : "", LLDB_UNCLAIMED_NOTICE);
	CHECK_CONTAINS(r.out ? r.out : "", "\"type\":\"bye\"");
	run_free(&r);
}

static void test_raw_missing_code(void)
{
	char dir[300], ptfile[400], elf[600], prog[512];
	const char *trace[] = { "trace", "--out", dir, "--no-decode",
				"--psb-period", "256", "--quiet-target", "--",
				prog, NULL };
	const char *dec[] = { "decode", "--pt", ptfile, "--elf", elf, NULL };
	const char *nocode[] = { "decode", "--pt", ptfile, NULL };
	char raw[700], badraw[700];
	const char *dec_raw[] = { "decode", "--pt", ptfile, "--raw", raw,
				  NULL };
	const char *bad_range[] = { "decode", "--pt", ptfile, "--raw",
				    badraw, NULL };
	uint64_t xstart = 0, xend = 0, xoff = 0;
	struct ptd_capture c;
	struct ptd_diag diag = { "" };
	struct stream_info si;
	struct run r;
	uint64_t base = 0;

	(void)snprintf(prog, sizeof(prog), "%s/prog-recursion", progs);
	(void)snprintf(dir, sizeof(dir), "%s/rec", workdir);
	r = run_ptctl(trace);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	REQUIRE(ptd_capture_load(dir, &c, &diag) == 0);
	for (size_t i = 0; i < c.tl.n; i++) {
		const struct ptd_tl_event *e = &c.tl.ev[i];

		if (e->op == PTD_TL_MAP && e->path &&
		    strstr(e->path, "prog-recursion")) {
			base = e->start - e->pgoff;
			xstart = e->start;
			xend = e->end;
			xoff = e->pgoff;
		}
	}
	(void)snprintf(ptfile, sizeof(ptfile), "%s/%s", dir, c.threads[0].pt);
	ptd_capture_fini(&c);
	REQUIRE(base != 0);
	(void)snprintf(elf, sizeof(elf), "%s:0x%" PRIx64, prog, base);
	{
		struct stat sb;
		uint64_t to = xoff + (xend - xstart);

		memset(&sb, 0, sizeof(sb));
		/* The mapping may run past the file's end; so does the
		 * image's section, truncated to the file. */
		if (stat(prog, &sb) == 0 && to > (uint64_t)sb.st_size)
			to = (uint64_t)sb.st_size;
		(void)snprintf(raw, sizeof(raw),
			       "%s:0x%" PRIx64 "-0x%" PRIx64 ":0x%" PRIx64,
			       prog, xoff, to, xstart);
		(void)snprintf(badraw, sizeof(badraw),
			       "%s:0x10-0x%" PRIx64 ":0x1000", prog,
			       (uint64_t)sb.st_size + 1);
	}

	r = run_ptctl(dec);
	CHECK_EQ_INT(r.status, 3);
	si = parse_stream(r.out, "prog-recursion");
	CHECK(si.all_valid);
	CHECK(si.errors > 0);
	CHECK(si.in_module > 50);
	CHECK_CONTAINS(r.out, "\"error\":\"nomap\"");
	CHECK_CONTAINS(r.err, "decode errors");

	/* The same code given ptxed's raw way, as the byte range of the
	 * program file at its load address: the same stream, byte for byte. */
	struct run r2 = run_ptctl(dec_raw);
	CHECK_EQ_INT(r2.status, 3);
	CHECK(r.out && r2.out && r.out_len == r2.out_len &&
	      !memcmp(r.out, r2.out, r.out_len));
	run_free(&r2);
	run_free(&r);

	r = run_ptctl(bad_range);
	CHECK_EQ_INT(r.status, 2);
	CHECK_CONTAINS(r.err, "is not inside");
	run_free(&r);

	r = run_ptctl(nocode);
	CHECK_EQ_INT(r.status, 1);
	CHECK_CONTAINS(r.err, "--elf");
	run_free(&r);
}

/* The instructions of a decode's output (their ips) and its last event
 * record's name; false if a line is not JSON or there are too many. */
static bool raw_result(const char *out, uint64_t *ips, size_t cap,
		       size_t *ret_n, char *last_event, size_t evcap)
{
	const char *p = out;
	size_t n = 0;

	last_event[0] = '\0';
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		cJSON *o = cJSON_ParseWithLength(p, len);
		const cJSON *t = o ? cJSON_GetObjectItem(o, "type") : NULL;
		const cJSON *ev = o ? cJSON_GetObjectItem(o, "event") : NULL;

		if (!o || !cJSON_IsString(t)) {
			cJSON_Delete(o);
			return false;
		}
		if (!strcmp(t->valuestring, "insn")) {
			if (n == cap) {
				cJSON_Delete(o);
				return false;
			}
			ips[n++] = hex_of(o, "ip");
		} else if (!strcmp(t->valuestring, "event") &&
			   cJSON_IsString(ev)) {
			(void)snprintf(last_event, evcap, "%s",
				       ev->valuestring);
		}
		cJSON_Delete(o);
		p = nl ? nl + 1 : NULL;
	}
	*ret_n = n;
	return true;
}

/* libipt's SKL014 cases (unit/skl014.h) as raw input: with ptxed's filter
 * options and the CPU of a "cpu" line, both paths decode them as ptxed
 * does; without the filter they cannot; a filter range whose A is above
 * its B is refused. */
static void test_raw_skl014(void)
{
	static const uint8_t models[] = { 78, 151 };
	struct skl014_case c;

	for (unsigned i = 0; skl014_get(i, &c); i++) {
		char code[400], ptf[400], raw[500];
		struct trace t;

		(void)snprintf(code, sizeof(code), "%s/%s.code", workdir,
			       c.ptt);
		(void)snprintf(ptf, sizeof(ptf), "%s/%s.pt", workdir, c.ptt);
		(void)snprintf(raw, sizeof(raw), "%s:0x%" PRIx64, code, c.org);
		tr_begin(&t);
		skl014_trace(&c, &t);
		tr_end(&t);
		REQUIRE(ptd_file_write_atomic(code, c.code, c.code_len) == 0);
		REQUIRE(ptd_file_write_atomic(ptf, t.buf, t.len) == 0);
		for (size_t m = 0; m < sizeof(models); m++) {
			for (int block = 0; block < 2; block++) {
				char cpu[16];
				const char *args[] = {
					"decode", "--pt", ptf, "--raw", raw,
					"--cpu", cpu, "--path",
					block ? "block" : "insn",
					"--filter:addr0_cfg", "1",
					"--filter:addr0_a", "0x1000",
					"--filter:addr0_b", "0x10ff", NULL
				};
				uint64_t ips[8];
				size_t n = 0;
				char ev[32];
				struct run r;

				(void)snprintf(cpu, sizeof(cpu), "6/%u",
					       models[m]);
				if (!c.filter)
					args[9] = NULL;
				r = run_ptctl(args);
				CHECK_EQ_INT(r.status, 0);
				if (r.status)
					fprintf(stderr, "%s cpu %s %s: %s\n",
						c.ptt, cpu, args[8], r.err);
				CHECK(r.out && raw_result(r.out, ips, 8, &n,
							  ev, sizeof(ev)));
				CHECK_EQ_U64(n, c.nexp);
				for (size_t k = 0; k < n && k < c.nexp; k++)
					CHECK_EQ_U64(ips[k], c.exp[k]);
				CHECK_EQ_STR(ev, "disabled");
				run_free(&r);
				if (!c.filter)
					continue;
				/* Without the filter: decode errors. */
				args[9] = NULL;
				r = run_ptctl(args);
				CHECK_EQ_INT(r.status, 3);
				run_free(&r);
			}
		}
		if (i == 0) {
			const char *args[] = {
				"decode", "--pt", ptf, "--raw", raw,
				"--filter:addr2_cfg", "2",
				"--filter:addr2_a", "0x2000",
				"--filter:addr2_b", "0x1fff", NULL
			};
			struct run r = run_ptctl(args);

			CHECK_EQ_INT(r.status, 1);
			CHECK_CONTAINS(r.err, "--filter:addr2_a 0x2000 is "
					      "above --filter:addr2_b 0x1fff");
			run_free(&r);
		}
	}
}

/* --max-insns detaches: the stream ends cleanly with what was traced and
 * the message says the target runs on. */
static void test_max_insns(void)
{
	char prog[512];
	const char *args[] = { "trace", "--max-insns", "5000", "--quiet-target",
			       "--", prog, "50", NULL };
	struct stream_info si;
	struct run r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-loop", progs);
	r = run_ptctl(args);
	CHECK_EQ_INT(r.status, 0);
	CHECK_CONTAINS(r.err, "detached at --max-insns");
	si = parse_stream(r.out, NULL);
	CHECK(si.all_valid);
	CHECK(si.bye_last);
	CHECK_EQ_INT(si.errors, 0);
	CHECK_EQ_U64(si.bye_insns, 5000);
	run_free(&r);
}

/* The (tid, ip) of every insn record of a stream, in order, as one string:
 * "tid:ip\n"... (NULL if a line does not parse). */
static char *insn_seq(const char *out, size_t *ret_n)
{
	struct ptd_buf b = { 0 };
	const char *p = out;
	size_t n = 0;

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		cJSON *o = cJSON_ParseWithLength(p, len);
		const cJSON *t = o ? cJSON_GetObjectItem(o, "type") : NULL;

		if (!o) {
			free(b.data);
			return NULL;
		}
		if (cJSON_IsString(t) && !strcmp(t->valuestring, "insn")) {
			char line[64];
			const cJSON *tid = cJSON_GetObjectItem(o, "tid");
			int k = snprintf(line, sizeof(line), "%d:%" PRIx64 "\n",
					 cJSON_IsNumber(tid) ? tid->valueint
							     : -1,
					 hex_of(o, "ip"));

			if (ptd_buf_append(&b, line, (size_t)k) < 0) {
				cJSON_Delete(o);
				free(b.data);
				return NULL;
			}
			n++;
		}
		cJSON_Delete(o);
		p = nl ? nl + 1 : NULL;
	}
	if (ptd_buf_append(&b, "", 1) < 0) {
		free(b.data);
		return NULL;
	}
	*ret_n = n;
	return (char *)b.data;
}

/* A capture exported as a ptd bundle, a perf.data and an LLDB bundle:
 * `ptctl decode` of each gives the same instructions of the same threads
 * in the same order as decoding the capture itself. */
static void test_export_roundtrip(void)
{
	static const char *const formats[] = { "bundle", "perf-data", "lldb" };
	char prog[512], dir[300], out[320];
	const char *trace[] = { "trace", "--out", dir, "--no-decode",
				"--quiet-target", "--", prog, NULL };
	const char *dec_cap[] = { "decode", "--records", "insn", dir, NULL };
	const char *dec_out[] = { "decode", "--records", "insn", out, NULL };
	char *want;
	size_t nwant = 0, i;
	struct run r;

	(void)snprintf(prog, sizeof(prog), "%s/prog-threads", progs);
	(void)snprintf(dir, sizeof(dir), "%s/exp", workdir);
	r = run_ptctl(trace);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	r = run_ptctl(dec_cap);
	CHECK_EQ_INT(r.status, 0);
	want = r.out ? insn_seq(r.out, &nwant) : NULL;
	run_free(&r);
	REQUIRE(want && nwant > 1000);

	for (i = 0; i < PTD_ARRAY_SIZE(formats); i++) {
		const char *exp[] = { "export", "--format", formats[i], dir,
				      out, NULL };
		char *got;
		size_t ngot = 0;

		(void)snprintf(out, sizeof(out), "%s/exp.%s", workdir,
			       formats[i]);
		r = run_ptctl(exp);
		CHECK_EQ_INT(r.status, 0);
		if (r.status)
			fprintf(stderr, "export %s: %s\n", formats[i], r.err);
		run_free(&r);
		/* not twice over the same output */
		r = run_ptctl(exp);
		CHECK_EQ_INT(r.status, 2);
		run_free(&r);

		r = run_ptctl(dec_out);
		CHECK_EQ_INT(r.status, 0);
		if (r.status)
			fprintf(stderr, "decode %s: %s\n", formats[i], r.err);
		got = r.out ? insn_seq(r.out, &ngot) : NULL;
		CHECK(got != NULL);
		CHECK_EQ_U64(ngot, nwant);
		if (got && strcmp(got, want)) {
			size_t k = 0;

			while (got[k] == want[k])
				k++;
			CHECK_FAIL_("%s: instructions differ from the "
				    "capture's at byte %zu: ...%.40s vs "
				    "...%.40s",
				    formats[i], k, got + k, want + k);
		}
		free(got);
		run_free(&r);
	}
	free(want);
}

/* decode --symbols: every instruction of the program's own functions
 * names its function, at the offset its ip says; puts is reached through
 * puts@plt; without --symbols no record has "sym". */
static void test_decode_symbols(void)
{
	char prog[512], dir[300], dbg[300];
	const char *trace[] = { "trace", "--out", dir, "--no-decode", "--",
				prog, NULL };
	const char *dec[] = { "decode", "--symbols", "--debug-dir", dbg,
			      dir, NULL };
	const char *plain[] = { "decode", dir, NULL };
	unsigned leaf = 0, middle = 0, plt = 0, main_ = 0;
	struct run r;
	const char *p;

	(void)snprintf(prog, sizeof(prog), "%s/prog-symbols", progs);
	(void)snprintf(dir, sizeof(dir), "%s/symcap", workdir);
	(void)snprintf(dbg, sizeof(dbg), "%s/nodebug", workdir);
	REQUIRE(mkdir(dbg, 0700) == 0);
	r = run_ptctl(trace);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	r = run_ptctl(dec);
	CHECK_EQ_INT(r.status, 0);
	REQUIRE(r.out);
	for (p = r.out; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		cJSON *o = cJSON_ParseWithLength(p, len);
		const cJSON *sym = cJSON_GetObjectItem(o, "sym");
		const cJSON *mod = cJSON_GetObjectItem(o, "module");

		if (cJSON_IsString(sym) && cJSON_IsString(mod) &&
		    strstr(mod->valuestring, "prog-symbols")) {
			const char *v = sym->valuestring;

			leaf += !strncmp(v, "sym_leaf+0x", 11);
			middle += !strncmp(v, "sym_middle+0x", 13);
			main_ += !strncmp(v, "main+0x", 7);
			plt += !strcmp(v, "puts@plt+0x0");
		}
		cJSON_Delete(o);
		p = nl ? nl + 1 : NULL;
	}
	CHECK(leaf >= 10);
	CHECK(middle >= 10);
	CHECK(main_ >= 3);
	CHECK_EQ_INT(plt, 1);
	CHECK_CONTAINS(r.out, "\"sym\":\"sym_leaf+0x0\"");
	run_free(&r);

	r = run_ptctl(plain);
	CHECK_EQ_INT(r.status, 0);
	CHECK(r.out && !strstr(r.out, "\"sym\""));
	run_free(&r);

	/* a projection keeps sym as any other field, on both paths */
	for (int path = 0; path < 2; path++) {
		const char *proj[] = { "decode", "--symbols", "--debug-dir",
				       dbg, "--records", "insn", "--path",
				       path ? "insn" : "block", "--fields",
				       "sym", dir, NULL };

		r = run_ptctl(proj);
		CHECK_EQ_INT(r.status, 0);
		REQUIRE(r.out);
		CHECK_CONTAINS(r.out, "{\"type\":\"insn\",\"sym\":\"sym_leaf+0x0\"}\n");
		CHECK(!strstr(r.out, "\"ip\""));
		run_free(&r);
	}
}

/* JIT code is named from the process's perf map: a map written for the
 * pid of a traced prog-jit names its anonymous code; the map's bad line is
 * reported on stderr with its line number. */
static void test_decode_symbols_jit(void)
{
	char prog[512], dir[300], mapdir[300], map[400], text[256];
	const char *trace[] = { "trace", "--out", dir, "--no-decode", "--",
				prog, NULL };
	const char *plain[] = { "decode", dir, NULL };
	const char *dec[] = { "decode", "--symbols", "--perf-map-dir", mapdir,
			      dir, NULL };
	unsigned long long jit = 0;
	unsigned long pid = 0;
	struct run r;
	const char *p;
	unsigned named = 0, anon = 0;

	(void)snprintf(prog, sizeof(prog), "%s/prog-jit", progs);
	(void)snprintf(dir, sizeof(dir), "%s/jitcap", workdir);
	(void)snprintf(mapdir, sizeof(mapdir), "%s/maps", workdir);
	REQUIRE(mkdir(mapdir, 0700) == 0);
	r = run_ptctl(trace);
	CHECK_EQ_INT(r.status, 0);
	run_free(&r);
	/* where the JIT code ran, and the pid, from a plain decode */
	r = run_ptctl(plain);
	REQUIRE(r.out);
	p = strstr(r.out, "\"module\":\"[anon]\"");
	REQUIRE(p);
	while (p > r.out && strncmp(p, "\"ip\":\"0x", 8))
		p--;
	REQUIRE(sscanf(p, "\"ip\":\"0x%llx", &jit) == 1);
	p = strstr(r.out, "\"pid\":");
	REQUIRE(p && sscanf(p, "\"pid\":%lu", &pid) == 1);
	run_free(&r);

	(void)snprintf(map, sizeof(map), "%s/perf-%lu.map", mapdir, pid);
	(void)snprintf(text, sizeof(text), "%llx 6 jitted_answer\n"
		       "%llx zz broken\n", jit, jit + 6);
	REQUIRE(ptd_file_write_atomic(map, text, strlen(text)) == 0);
	r = run_ptctl(dec);
	CHECK_EQ_INT(r.status, 0);
	REQUIRE(r.out);
	for (p = r.out; (p = strstr(p, "\"module\":\"[anon]\"")); p++) {
		const char *nl = strchr(p, '\n');
		static const char want[] = "\"sym\":\"jitted_answer+0x";

		anon++;
		named += nl && memmem(p, (size_t)(nl - p), want,
				      sizeof(want) - 1) != NULL;
	}
	CHECK(anon >= 4);
	CHECK_EQ_INT(named, anon);
	CHECK_CONTAINS(r.out, "\"sym\":\"jitted_answer+0x5\"");
	CHECK_CONTAINS(r.err, "map:2: SIZE is not a hex number");
	run_free(&r);
}

static void test_bad_usage(void)
{
	static const struct {
		const char *args[8];
		int status;
		const char *msg;
	} cases[] = {
		{ { "bogus" }, 1, "unknown verb 'bogus'" },
		{ { "decode", "/nonexistent/capture" }, 2,
		  "/nonexistent/capture" },
		{ { "decode", "--records", "insn,foo", "x" }, 1,
		  "unknown record kind 'foo'" },
		{ { "decode", "--path", "insn", "--records", "block", "x" }, 1,
		  "needs --path block" },
		{ { "decode", "--fields", "ip,address", "x" }, 1,
		  "--fields: unknown field 'address' (fields: type, pid, " },
		{ { "decode", "--fields", "ip,tid,ip", "x" }, 1,
		  "--fields: 'ip' given twice" },
		{ { "decode", "--fields", ",", "x" }, 1,
		  "--fields: no field given" },
		{ { "trace", "--fields", "Ip", "--", "true" }, 1,
		  "--fields: unknown field 'Ip'" },
		{ { "stream", "1", "--fields", "ip,bogus" }, 1,
		  "--fields: unknown field 'bogus'" },
		{ { "stream", "1", "--tid", "12x" }, 1, "--tid: expected" },
		{ { "stream", "--running", "1" }, 1,
		  "--running: only with --rule" },
		{ { "stream", "--rule", "x" }, 1,
		  "--rule: expected a rule number, got 'x'" },
		{ { "stream", "--rule", "2", "3" }, 1,
		  "expected one SESSION or --rule RULE" },
		{ { "watch", "--exe", "/bin/true", "--fields", "ip" }, 1,
		  "go with --follow" },
		{ { "watch", "--exe", "/bin/true", "--follow", "--json" }, 1,
		  "not with --json" },
		/* --trigger is not taken for --symbols (both were 'Y') */
		{ { "attach", "1", "--trigger", "snapshot:x:y" }, 1,
		  "needs --snapshot" },
		{ { "attach", "1", "--jobs", "0" }, 1,
		  "--jobs: expected a number of threads from 1 to 64, got '0'" },
		{ { "attach", "1", "--snapshot", "--jobs", "0" }, 1,
		  "--jobs: expected a number of threads from 1 to 64, got '0'" },
		{ { "replay", "--fields", "", "/x" }, 1,
		  "--fields: no field given" },
		{ { "decode", "--format", "bin", "x" }, 1,
		  "--format: expected 'json', 'binary' or 'packed', got 'bin'" },
		{ { "stream", "1", "--output", "/tmp/x" }, 1,
		  "--output: only with --format binary" },
		{ { "stream", "--rule", "2", "--format", "binary" }, 1,
		  "--format binary: a session's stream only" },
		{ { "stream", "--rule", "2", "--format", "packed" }, 1,
		  "--format packed: a session's stream only" },
		{ { "decode", "--from-binary", "f", "--format", "binary" }, 1,
		  "--from-binary FILE takes no trace and no --format" },
		{ { "decode", "--from-binary", "/nonexistent/f" }, 2,
		  "/nonexistent/f" },
		{ { "decode", "--cpu", "6/x", "x" }, 1, "--cpu" },
		{ { "decode", "--cpu", "6/200", "x" }, 1,
		  "--cpu 6/200: family 6 model 200 (0xc8) is not a CPU "
		  "libipt" },
		{ { "decode", "--cpu", "7/78", "x" }, 1, "or 'none'" },
		{ { "decode", "--filter:addr0_cfg", "3", "x" }, 1,
		  "--filter:addr0_cfg: expected 0 (off), 1 (filter) or 2" },
		{ { "decode", "--filter:addr3_b", "12z", "x" }, 1,
		  "--filter:addr3_b: expected a number, got '12z'" },
		{ { "decode", "--filter:addr1_cfg", "1", "x" }, 1,
		  "--filter:addr1_cfg is for --pt input" },
		{ { "decode", "--tid", "12abc", "x" }, 1, "--tid" },
		{ { "decode", "--debug-dir", "/d", "x" }, 1,
		  "--debug-dir and --perf-map-dir are for --symbols" },
		{ { "decode" }, 1, "expected one TRACE" },
		{ { "trace" }, 1, "no program" },
		{ { "trace", "--psb-period", "1000", "--", "true" }, 1,
		  "power of two" },
		{ { "trace", "--start", "main", "--", "true" }, 1,
		  "--start: expected 'exec' or 'entry', got 'main'" },
		{ { "trace", "--", "/nonexistent/program" }, 2,
		  "/nonexistent/program" },
		{ { "verify" }, 1, "Usage" },
		{ { "export", "x", "y" }, 1, "--format FORMAT" },
		{ { "export", "--format", "tar", "x", "y" }, 1,
		  "expected bundle, perf-data, lldb or perfetto" },
		{ { "export", "--format", "perfetto", "x", "y" }, 1,
		  "expected one TRACE" },
		{ { "export", "--format", "perfetto", "--min-width", "1",
		    "x" }, 1, "--min-width is for ptctl flamegraph" },
		{ { "export", "--format", "perfetto", "/nonexistent/t" }, 2,
		  "/nonexistent/t" },
		{ { "export", "--format", "perfetto", "--time", "tsc", "x" },
		  1, "--time: expected 'auto' or 'insns'" },
		{ { "flamegraph", "--time", "insns", "x" }, 1,
		  "--time is for ptctl export" },
		{ { "flamegraph" }, 1, "expected one TRACE" },
		{ { "flamegraph", "--format", "perfetto", "x" }, 1,
		  "--format is for ptctl export" },
		{ { "flamegraph", "--min-width", "-1", "x" }, 1,
		  "--min-width: expected a number of pixels" },
		{ { "flamegraph", "--min-width", "nan", "x" }, 1,
		  "--min-width: expected a number of pixels" },
		{ { "export", "--format", "lldb", "--reference", "x", "y" }, 1,
		  "--reference is for --format bundle" },
		{ { "export", "--format", "perf-data", "/nonexistent/cap", "y" },
		  2, "/nonexistent/cap" },
		/* daemon verbs */
		{ { "--socket", "/nonexistent/ptd.sock", "list" }, 5,
		  "is ptd running? (systemctl start ptd)" },
		{ { "--socket", "/nonexistent/ptd.sock", "attach", "1" }, 5,
		  "cannot connect to /nonexistent/ptd.sock" },
		{ { "watch", "--cgroup", "sys/fs/cgroup" }, 1,
		  "--cgroup: expected the absolute path of a cgroup's" },
		{ { "watch", "--cgroup", "/a", "--comm", "b" }, 1,
		  "--exe PATH, --comm NAME or --cgroup DIR (one of them)" },
		{ { "attach" }, 1, "expected one PID" },
		{ { "attach", "12x" }, 1, "expected one PID" },
		{ { "attach", "1", "--source", "bogus" }, 1,
		  "--source: expected auto, software or intel_pt" },
		{ { "attach", "1", "--capture", "rel/dir" }, 1,
		  "--capture: expected an absolute path" },
		{ { "attach", "1", "--record-format", "lldb" }, 1,
		  "--record-format needs --record DIR" },
		{ { "attach", "1", "--record", "/", "--record-format", "tar" },
		  1, "--record-format: expected bundle or lldb" },
		{ { "attach", "1", "--record", "/", "--record-format",
		    "lldb" },
		  2, "'/' exists and is not an empty directory" },
		{ { "record", "1", "d", "--format", "tar" }, 1,
		  "--format: expected bundle or lldb" },
		{ { "record", "1", "d", "--bogus" }, 1,
		  "unknown option '--bogus'" },
		{ { "export", "--format", "lldb", "/" }, 1,
		  "--format FORMAT CAPTURE OUT" },
		{ { "stream" }, 1, "expected one SESSION" },
		{ { "detach" }, 1, "expected a SESSION" },
		{ { "status", "12x" }, 1, "expected a session id" },
	};

	for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
		struct run r = run_ptctl(cases[i].args);
		const char *where = cases[i].status == 1 &&
					    !strcmp(cases[i].msg, "Usage")
				    ? r.out
				    : r.err;

		check_current = cases[i].args[0];
		CHECK_EQ_INT(r.status, cases[i].status);
		CHECK_CONTAINS(where, cases[i].msg);
		run_free(&r);
	}
	check_current = "test_bad_usage";
}

static void test_bad_capture(void)
{
	char dir[300], path[400];
	const char *dec[] = { "decode", dir, NULL };
	static const char *const manifests[] = {
		"not json",
		"{\"format\":\"something-else\",\"version\":1}",
		"{\"format\":\"ptd-swpt-capture\",\"version\":99}",
		"{\"format\":\"ptd-swpt-capture\",\"version\":1,\"pid\":\"x\"}",
	};

	(void)snprintf(dir, sizeof(dir), "%s/bad", workdir);
	(void)mkdir(dir, 0755);
	(void)snprintf(path, sizeof(path), "%s/capture.json", dir);
	for (size_t i = 0; i < PTD_ARRAY_SIZE(manifests); i++) {
		struct run r;

		REQUIRE(ptd_file_write_atomic(path, manifests[i],
					      strlen(manifests[i])) == 0);
		r = run_ptctl(dec);
		CHECK_EQ_INT(r.status, 2);
		CHECK_CONTAINS(r.err, "capture.json");
		run_free(&r);
	}
}

/* Against a real ptd: the refusals a user meets, each with its exit code
 * and a message that says what went wrong. */
static void test_daemon_refusals(void)
{
	char conf[400], sock[400], text[600], ptd[600], pidarg[32];
	pid_t d;
	int st = 0;

	(void)snprintf(sock, sizeof(sock), "%s/ptd.sock", workdir);
	(void)snprintf(conf, sizeof(conf), "%s/ptd.conf", workdir);
	/* no intel_pt here, whatever the machine has */
	(void)snprintf(text, sizeof(text), "socket_path = %s\n"
		       "intel_pt_sysfs = /nonexistent/intel_pt\n", sock);
	REQUIRE(ptd_file_write_atomic(conf, text, strlen(text)) == 0);
	(void)snprintf(ptd, sizeof(ptd), "%.*s/ptd",
		       (int)(strrchr(ptctl, '/') - ptctl), ptctl);
	d = fork();
	if (d == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 2);
		execl(ptd, ptd, "-c", conf, (char *)NULL);
		_exit(127);
	}
	REQUIRE(d > 0);
	for (int i = 0; i < 200 && access(sock, F_OK) < 0; i++)
		usleep(10000);
	(void)snprintf(pidarg, sizeof(pidarg), "%d", (int)getpid());
	{
		const struct {
			const char *args[8];
			int status;
			const char *msg;
		} cases[] = {
			{ { "--socket", sock, "attach", "4000000" }, 7,
			  "no such process" },
			{ { "--socket", sock, "attach", pidarg, "--source",
			    "intel_pt" }, 9, "/nonexistent/intel_pt" },
			{ { "--socket", sock, "status", "4242" }, 7,
			  "no session 4242" },
			{ { "--socket", sock, "detach", "4242" }, 7,
			  "no session 4242" },
			{ { "--socket", sock, "stream", "4242" }, 7,
			  "no session 4242" },
		};

		for (size_t i = 0; i < PTD_ARRAY_SIZE(cases); i++) {
			struct run r = run_ptctl(cases[i].args);

			check_current = cases[i].args[2];
			CHECK_EQ_INT(r.status, cases[i].status);
			CHECK_CONTAINS(r.err, cases[i].msg);
			run_free(&r);
		}
		check_current = "test_daemon_refusals";
	}
	{
		const char *args[] = { "--socket", sock, "list", "--json",
				       NULL };
		struct run r = run_ptctl(args);

		CHECK_EQ_INT(r.status, 0);
		CHECK_CONTAINS(r.out, "\"sessions\"");
		run_free(&r);
	}
	(void)kill(d, SIGTERM);
	CHECK(waitpid(d, &st, 0) == d);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	const char *root = getenv("PTD_BUILD_ROOT");
	const char *tmp = getenv("TMPDIR");

	progs = getenv("PTD_TEST_PROGS");
	if (!root || !progs)
		SKIP_ALL("PTD_BUILD_ROOT/PTD_TEST_PROGS not set (run through "
			 "meson test)");
	(void)snprintf(ptctl, sizeof(ptctl), "%s/daemon/ptctl", root);
	(void)snprintf(workdir, sizeof(workdir), "%s/ptd-ptctl-XXXXXX",
		       tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(workdir))
		return 1;
	RUN(test_trace_stream);
	RUN(test_trace_from_entry);
	RUN(test_capture_decode_verify);
	RUN(test_raw_missing_code);
	RUN(test_raw_skl014);
	RUN(test_decode_notice);
	RUN(test_max_insns);
	RUN(test_export_roundtrip);
	RUN(test_decode_symbols);
	RUN(test_decode_symbols_jit);
	RUN(test_bad_usage);
	RUN(test_bad_capture);
	RUN(test_daemon_refusals);
	(void)ptd_rm_rf(workdir);
	return check_done();
}
