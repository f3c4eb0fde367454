/* SPDX-License-Identifier: MIT */
/*
 * ptd: the tracing daemon.
 *
 *   ptd [-c FILE] [--check-config]
 *
 * Loads the configuration (default /etc/ptd/ptd.conf: a missing default
 * file means the defaults; -c naming a missing file is an error), builds
 * the server and runs its loop in the foreground (systemd Type=notify).
 * Exit status: 0 after a clean shutdown or a good --check-config; 1 bad
 * configuration or usage; 2 the daemon could not start.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/diag.h"
#include "common/fileio.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/proto.h"
#include "daemon/server.h"

#define PTD_DEFAULT_CONFIG "/etc/ptd/ptd.conf"

static const char *arg_config = PTD_DEFAULT_CONFIG;
static bool arg_config_given;
static bool arg_check;

static void help(FILE *f)
{
	fprintf(f,
		"Usage: ptd [-c FILE] [--check-config]\n\n"
		"Trace processes with Intel PT (or the software PT source) and "
		"stream their\ndecoded instructions to clients of a Unix "
		"socket.\n\n"
		"  -c, --config FILE  configuration (default %s)\n"
		"      --check-config check the configuration and exit\n"
		"      --version      print the version\n",
		PTD_DEFAULT_CONFIG);
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			arg_config = optarg;
			arg_config_given = true;
			break;
		case 'C':
			arg_check = true;
			break;
		case 'V':
			printf("ptd %s (control protocol %d)\n",
			       PTD_VERSION_STRING, PTD_PROTO_VERSION);
			return 0;
		case 'h':
			help(stdout);
			return 0;
		default:
			help(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ptd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 1;
}

static int load_config(struct ptd_config *cfg)
{
	struct ptd_diag diag = { "" };
	int r;

	ptd_config_defaults(cfg);
	r = ptd_config_load(arg_config, cfg, &diag);
	if (r == -ENOENT && !arg_config_given)
		return 0;	/* no config file: the defaults */
	if (r < 0) {
		fprintf(stderr, "ptd: %s\n",
			diag.msg[0] ? diag.msg : ptd_strerror(r));
		return r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ptd_diag diag = { "" };
	struct ptd_server *srv = NULL;
	struct ptd_config cfg;
	int r;

	r = parse_args(argc, argv);
	if (r <= 0)
		return r < 0 ? 1 : 0;
	if (load_config(&cfg) < 0)
		return 1;
	if (arg_check) {
		printf("ok\n");
		return 0;
	}
	ptd_log_init(cfg.log_level);
	if (ptd_nofile_raise() < 0)
		ptd_log_info("cannot raise the open file limit; keeping it");
	r = ptd_server_new(&cfg, NULL, &srv, &diag);
	if (r < 0) {
		ptd_log_error("cannot start: %s",
			      diag.msg[0] ? diag.msg : ptd_strerror(r));
		return 2;
	}
	r = ptd_server_run(srv);
	if (r < 0)
		ptd_log_err(PTD_LOG_ERROR, r, "control loop failed");
	ptd_server_free(srv);
	ptd_log_info("stopped");
	return r < 0 ? 2 : 0;
}
