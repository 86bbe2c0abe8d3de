/*
 * datavofs: mounts the datasets of an origin as a read-only tree of tar
 * shards backed by the cache hierarchy.
 *
 *   datavofs [ORIGIN] MOUNTPOINT [-f] [-d] [-o opt[,opt...]]
 *
 * The origin comes from the first of: the positional argument, -o origin=,
 * `origin:` in the config, $DATAVO_ORIGIN. Start-up reads the config,
 * opens the tiers (cleaning what dead processes left, B4) and loads the
 * namespace (from its disk cache when the origin is down, B7) before the
 * mount appears, so a mount that exists can serve.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "config/log.h"
#include "config/secret.h"
#include "config/util.h"
#include "datavofs.h"
#include "fuse_ops.h"
#include "metrics.h"
#include "status.h"
#include "transport.h"
#include "writeback/wb_fuse.h"
#include "writeback/writeback.h"

struct cli {
	const char *pos[2];
	int npos;
	char *origin_arg;        /* pos[0] copied before argv is scrubbed */
	char *origin;
	char *config;
	char *verify;
	char *state_dir;
	char *log_level;
	char *manifest_ttl;
	char *metrics;           /* -o metrics=ADDR:PORT */
	int metrics_default;     /* -o metrics */
	int no_passthrough;
	char *fuse_io_uring;     /* -o fuse_io_uring=auto|on|off */
	int help;
	int version;
};

enum { KEY_HELP, KEY_VERSION, KEY_DISCARD };

#define CLI_OPT(t, p) { t, offsetof(struct cli, p), 1 }

static const struct fuse_opt cli_opts[] = {
	CLI_OPT("origin=%s", origin),
	CLI_OPT("config=%s", config),
	CLI_OPT("verify=%s", verify),
	CLI_OPT("state_dir=%s", state_dir),
	CLI_OPT("log_level=%s", log_level),
	CLI_OPT("manifest_ttl=%s", manifest_ttl),
	CLI_OPT("metrics=%s", metrics),
	CLI_OPT("metrics", metrics_default),
	CLI_OPT("no_passthrough", no_passthrough),
	CLI_OPT("fuse_io_uring=%s", fuse_io_uring),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* fstab words that mean nothing to a FUSE mount */
	FUSE_OPT_KEY("_netdev", KEY_DISCARD),
	FUSE_OPT_KEY("nofail", KEY_DISCARD),
	FUSE_OPT_KEY("auto", KEY_DISCARD),
	FUSE_OPT_KEY("noauto", KEY_DISCARD),
	FUSE_OPT_KEY("defaults", KEY_DISCARD),
	FUSE_OPT_KEY("user", KEY_DISCARD),
	FUSE_OPT_KEY("users", KEY_DISCARD),
	FUSE_OPT_KEY("nouser", KEY_DISCARD),
	FUSE_OPT_KEY("ro", KEY_DISCARD), /* always added below */
	FUSE_OPT_END
};

static void usage(const char *prog)
{
	printf("usage: %s [ORIGIN] MOUNTPOINT [-f] [-d] [-o opt[,opt...]]\n\n"
	       "ORIGIN is http(s)://HOST/PATH, file:///PATH or /PATH.\n\n"
	       "datavofs options:\n"
	       "    -o origin=URL          origin (if not given as an argument)\n"
	       "    -o config=PATH         shards.yaml (default: /etc/datavo/shards.yaml,\n"
	       "                           then ~/.config/datavo/shards.yaml, then built in)\n"
	       "    -o manifest_ttl=SECS   manifest refresh interval (default 60)\n"
	       "    -o metrics[=ADDR:PORT] Prometheus metrics (default 127.0.0.1:9110;\n"
	       "                           PORT alone is on 127.0.0.1; off disables)\n"
	       "    -o verify=MODE         fill (default), always or off\n"
	       "    -o state_dir=PATH      where manifests are cached\n"
	       "    -o log_level=LEVEL     error, warning (default), info, debug\n"
	       "    -o no_passthrough      never use kernel passthrough\n"
	       "    -o fuse_io_uring=MODE  FUSE over io_uring: auto (default), on, off\n"
	       "    -o allow_other         let other users read the mount\n"
	       "    -f                     stay in the foreground, log to stderr\n"
	       "    -d                     debug: foreground, every FUSE call logged\n\n"
	       "See datavofs(8).\n", prog);
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct cli *cli = data;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (cli->npos == 2) {
			fprintf(stderr, "datavofs: too many arguments: '%s'\n", arg);
			return -1;
		}
		cli->pos[cli->npos++] = arg;
		return 0;
	case KEY_HELP:
		cli->help = 1;
		return 0;
	case KEY_VERSION:
		cli->version = 1;
		return 0;
	case KEY_DISCARD:
		return 0;
	default:
		return 1;
	}
}

/*
 * The origin URL may carry a password or a token: once parsed, they are
 * overwritten in argv so that ps and /proc/PID/cmdline do not show them.
 * Positional arguments and every -o list are scrubbed (a mountpoint has
 * no "://", so it is left as it is).
 */
static void scrub_argv(int argc, char *argv[])
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			dv_secret_scrub_opts(argv[++i]);
		else if (strncmp(argv[i], "-o", 2) == 0)
			dv_secret_scrub_opts(argv[i] + 2);
		else if (argv[i][0] != '-')
			dv_secret_scrub_url(argv[i], strlen(argv[i]));
	}
}

static void syslog_sink(enum dv_log_level level, const char *line)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

	syslog(prio[level], "%s", line);
}

/* -o options override the config file. 0 or -1 after a message. */
static int apply_overrides(struct cli *cli, struct dv_config *cfg)
{
	uint64_t v;

	if (cli->verify) {
		if (strcmp(cli->verify, "fill") == 0)
			cfg->verify = DV_VERIFY_FILL;
		else if (strcmp(cli->verify, "always") == 0)
			cfg->verify = DV_VERIFY_ALWAYS;
		else if (strcmp(cli->verify, "off") == 0)
			cfg->verify = DV_VERIFY_OFF;
		else {
			fprintf(stderr, "datavofs: -o verify=%s: use fill, always or off\n",
				cli->verify);
			return -1;
		}
	}
	if (cli->fuse_io_uring &&
	    dv_config_lookup_fuse_uring(cli->fuse_io_uring, &cfg->fuse_io_uring)) {
		fprintf(stderr, "datavofs: -o fuse_io_uring=%s: use auto, on or off\n",
			cli->fuse_io_uring);
		return -1;
	}
	if (cli->manifest_ttl) {
		if (dv_parse_uint(cli->manifest_ttl, 86400 * 365, &v)) {
			fprintf(stderr, "datavofs: -o manifest_ttl=%s: not a number of seconds\n",
				cli->manifest_ttl);
			return -1;
		}
		cfg->manifest_ttl = (unsigned)v;
	}
	if (cli->state_dir) {
		char *p;

		if (dv_expand_path(cli->state_dir, &p)) {
			fprintf(stderr, "datavofs: -o state_dir=%s: cannot expand\n",
				cli->state_dir);
			return -1;
		}
		free(cfg->state_dir);
		cfg->state_dir = p;
	}
	return 0;
}

static const char *pick_origin(struct cli *cli, struct dv_config *cfg)
{
	const char *env = getenv("DATAVO_ORIGIN");

	if (cli->npos == 2)
		return cli->origin_arg;
	if (cli->origin)
		return cli->origin;
	if (cfg->origin)
		return cfg->origin;
	if (env && *env)
		return env;
	return NULL;
}

/* Manifests of each origin are cached apart, under the state directory. */
static char *state_dir_for(const struct dv_config *cfg, const char *origin)
{
	char base[PATH_MAX], *out = NULL;

	const char *b = dv_config_manifest_base(cfg, base, sizeof(base));

	if (!b) {
		fprintf(stderr, "datavofs: %s\n", DV_CONFIG_NO_STATE_DIR);
		return NULL;
	}
	if (asprintf(&out, "%s/%016llx", b,
		     (unsigned long long)XXH3_64bits(origin, strlen(origin))) < 0)
		out = NULL;
	return out;
}

/*
 * The exporter binds now, before the daemon forks, so that a port in use
 * fails the mount on the terminal: -o metrics[=…] wins over the config.
 */
static int setup_metrics(struct cli *cli, struct dv_fs *fs)
{
	const char *spec = cli->metrics ? cli->metrics :
			   cli->metrics_default ? "" : fs->cfg->metrics;
	char err[512];

	if (!spec || dv_metrics_spec_is_off(spec))
		return 0;
	if (dv_metrics_listen(fs, spec, &fs->metrics, err, sizeof(err))) {
		fprintf(stderr, "datavofs: %s\n", err);
		return -1;
	}
	return 0;
}

static void warn_config(void *arg, const char *msg)
{
	dv_warn("%s", msg);
}

/*
 * FUSE over io_uring is decided before the mount, so that fuse_io_uring: on
 * fails it on the terminal when the machine cannot give it.
 */
static int setup_transport(struct dv_fs *fs)
{
	const char *why = NULL;
	int ret;

	fs->uring_mode = fs->cfg->fuse_io_uring;
	ret = dv_transport_probe(fs->uring_mode, &why);
	if (ret < 0) {
		fprintf(stderr, "datavofs: fuse_io_uring is on, but %s%s\n", why,
			strcmp(why, "enable_uring is off") == 0 ?
				" (as root: echo Y > " DV_ENABLE_URING_PATH ")" : "");
		return -1;
	}
	fs->uring_asked = ret == 1;
	fs->transport_why = why;
	return 0;
}

static int setup_fs(struct cli *cli, struct dv_fs *fs)
{
	struct dv_ns_options nso = { 0 };
	char err[1024];
	const char *origin;
	char *state;
	int ret;

	ret = dv_config_resolve(cli->config, NULL, &fs->cfg, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "datavofs: %s\n", err);
		return -1;
	}
	dv_config_file_warnings(fs->cfg, warn_config, NULL);
	if (apply_overrides(cli, fs->cfg) || setup_transport(fs))
		return -1;
	origin = pick_origin(cli, fs->cfg);
	if (!origin) {
		fprintf(stderr, "datavofs: no origin: give it as the first argument, "
				"-o origin=URL, 'origin:' in shards.yaml, or $DATAVO_ORIGIN\n");
		return -1;
	}
	ret = dv_origin_new(origin, &fs->cfg->http, &fs->origin, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "datavofs: %s\n", err);
		return -1;
	}
	dv_origin_fetcher(fs->origin, &fs->fetcher);
	ret = dv_hierarchy_new(fs->cfg, &fs->hier, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "datavofs: %s%s%s\n", err,
			fs->cfg->path ? " (config " : "",
			fs->cfg->path ? fs->cfg->path : "");
		return -1;
	}
	state = state_dir_for(fs->cfg, fs->origin->url);
	if (!state)
		return -1;
	nso.origin = fs->origin;
	nso.state_dir = state;
	nso.ttl = fs->cfg->manifest_ttl;
	ret = dv_ns_new(&nso, &fs->ns, err, sizeof(err));
	free(state);
	if (ret) {
		fprintf(stderr, "datavofs: %s\n", err);
		return -1;
	}
	ret = dv_wb_new(fs->cfg, fs->ns, &fs->wb, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "datavofs: %s\n", err);
		return -1;
	}
	fs->entry_timeout = fs->cfg->manifest_ttl < 60 ? fs->cfg->manifest_ttl : 60;
	fs->want_passthrough = !cli->no_passthrough;
	fs->started = (uint64_t)time(NULL);
	return setup_metrics(cli, fs);
}

static void teardown_fs(struct dv_fs *fs)
{
	dv_metrics_free(fs->metrics);
	dv_wb_free(fs->wb);
	dv_ns_free(fs->ns);
	dv_hierarchy_free(fs->hier);
	dv_origin_free(fs->origin);
	dv_config_free(fs->cfg);
}

static int run_session(struct fuse_args *args, struct fuse_cmdline_opts *opts,
		       struct dv_fs *fs)
{
	static struct fuse_lowlevel_ops ops;
	struct fuse_loop_config *lc;
	struct fuse_session *se;
	int ret = 1;

	/* libfuse >= 3.18 runs the rings when INIT grants io_uring (dv_init). */
	if (fs->uring_asked && fuse_opt_add_arg(args, "-oio_uring"))
		return 1;
	/*
	 * Read-only in the kernel unless write-back areas are configured;
	 * then the daemon answers EROFS outside them (writeback/wb_fuse.h).
	 */
	if (!fs->wb && fuse_opt_add_arg(args, "-oro"))
		return 1;
	dv_wb_fuse_ops(&dv_fuse_ops, &ops);
	se = fuse_session_new(args, &ops, sizeof(ops), fs);
	if (!se)
		return 1;
	fs->se = se;
	if (fuse_set_signal_handlers(se))
		goto out_destroy;
	if (fuse_session_mount(se, opts->mountpoint))
		goto out_signals;
	if (fuse_daemonize(opts->foreground))
		goto out_unmount;
	if (!opts->foreground) {
		openlog("datavofs", LOG_PID, LOG_DAEMON);
		dv_log_set_sink(syslog_sink);
	}
	dv_info("mounted %s on %s", fs->origin->url, opts->mountpoint);
	if (fs->metrics)
		dv_metrics_start(fs->metrics);
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_clone_fd(lc, opts->clone_fd);
	fuse_loop_cfg_set_max_threads(lc, opts->max_threads ? opts->max_threads : 64);
	/* UINT_MAX is "not given"; libfuse 3.14 warns when handed it. */
	if (opts->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, opts->max_idle_threads);
	ret = fuse_session_loop_mt(se, lc) ? 1 : 0;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	return ret;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	struct cli cli = { 0 };
	struct dv_fs fs = { 0 };
	enum dv_log_level level;
	int ret = 1;

	/* libcurl runs with NOSIGNAL: a peer closing must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * A shell starts background jobs with SIGINT ignored, and libfuse
	 * leaves an ignored signal alone: SIGINT must unmount all the same.
	 */
	signal(SIGINT, SIG_DFL);
	/*
	 * The daemon holds credentials for its whole life (origin URL, cloud
	 * keys): no core dump, and no /proc/PID/environ, mem or ptrace for
	 * other processes of the same user.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		dv_warn("cannot make the process non-dumpable: %s", strerror(errno));
	if (fuse_opt_parse(&args, &cli, cli_opts, opt_proc))
		return 1;
	if (cli.npos == 2) {
		cli.origin_arg = strdup(cli.pos[0]);
		if (!cli.origin_arg)
			goto out;
	}
	scrub_argv(argc, argv);
	if (cli.help || cli.version) {
		if (cli.help)
			usage(argv[0]);
		else
			printf("datavofs %s (libfuse %s)\n", DV_VERSION,
			       fuse_pkgversion());
		fuse_opt_free_args(&args);
		return 0;
	}
	if (cli.npos == 0) {
		usage(argv[0]);
		fuse_opt_free_args(&args);
		return 1;
	}
	if (cli.log_level) {
		if (dv_log_parse_level(cli.log_level, &level)) {
			fprintf(stderr, "datavofs: -o log_level=%s: use error, warning, info or debug\n",
				cli.log_level);
			goto out;
		}
		dv_log_set_level(level);
	}
	/* The mountpoint goes back for libfuse (ro: run_session). */
	if (fuse_opt_add_arg(&args, cli.pos[cli.npos - 1]) ||
	    fuse_opt_add_arg(&args, "-odefault_permissions,fsname=datavofs,subtype=datavofs"))
		goto out;
	if (fuse_parse_cmdline(&args, &opts))
		goto out;
	if (opts.debug && !cli.log_level)
		dv_log_set_level(DV_LOG_DEBUG);
	if (setup_fs(&cli, &fs) == 0)
		ret = run_session(&args, &opts, &fs);
	teardown_fs(&fs);
	dv_info("stopped (%s)", ret ? "with an error" : "clean");
	free(opts.mountpoint);
out:
	fuse_opt_free_args(&args);
	dv_secret_free(cli.origin_arg);
	dv_secret_free(cli.origin);
	free(cli.config);
	free(cli.verify);
	free(cli.state_dir);
	free(cli.log_level);
	free(cli.manifest_ttl);
	free(cli.metrics);
	free(cli.fuse_io_uring);
	return ret;
}
