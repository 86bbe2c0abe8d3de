/*
 * The background syncer (see syncer.h).
 */
#include "syncer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"

#define MAX_QUEUED 32
#define SYNC_DELAY_S 5 /* a job waits this long, unless the queue is half full */

struct job {
	struct job *next;
	struct timespec due;        /* CLOCK_MONOTONIC */
	char path[PATH_MAX];
	char marker[PATH_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;      /* on CLOCK_MONOTONIC: init_cond() */
/* All protected by lock. */
static struct job *head, *tail;
static unsigned queued;          /* jobs in the list */
static bool busy;                /* the worker is running a job */
static bool stop;                /* the worker is to exit when idle */
static unsigned users;           /* dv_syncer_hold() minus release */
static pid_t worker_pid;         /* the process whose worker runs, or 0 */
static pthread_t worker;
static unsigned hurry;           /* callers of dv_syncer_flush() waiting */
static bool joining;             /* a dv_syncer_release() joins the worker */

/* fsync() of the directory that holds @path. 0 or -errno. */
static int sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int fd, ret = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else /* "/x" → "/" */
		snprintf(dir, sizeof(dir), "%.*s",
			 (int)(slash == path ? 1 : slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) && errno != EINVAL)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * A file gone (evicted) needs no sync. (Opened by name, a file whose
 * writeback failed while the kernel dropped its inode would sync clean:
 * that is the kernel's limit, as for any reader after the error.)
 */
void dv_syncer_run(const char *path, const char *marker)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	int ret;

	if (fd < 0 && errno != ENOENT)
		dv_warn("opening %s to sync it: %s; %s stays, for the next start to check",
			path, strerror(errno), marker);
	else if (fd >= 0 && fdatasync(fd) && errno != EINVAL)
		dv_warn("syncing a cached shard to disk: %s; %s stays, for the next start to check",
			strerror(errno), marker);
	else if ((ret = sync_parent(path)) < 0)
		dv_warn("syncing a tier directory: %s; %s stays, for the next start to check",
			strerror(-ret), marker);
	else if (unlink(marker) && errno != ENOENT)
		dv_warn("removing %s: %s", marker, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void run(struct job *j)
{
	dv_syncer_run(j->path, j->marker);
	free(j);
}

static void init_cond(void)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&cond, &attr);
	pthread_condattr_destroy(&attr);
}

/* May the head job run now? Called with lock held. */
static bool head_is_due(void)
{
	struct timespec now;

	if (stop || hurry || queued >= MAX_QUEUED / 2)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > head->due.tv_sec ||
	       (now.tv_sec == head->due.tv_sec &&
		now.tv_nsec >= head->due.tv_nsec);
}

/*
 * The worker yields the CPU to everything else (SCHED_IDLE): syncing is
 * the one job here nobody waits for, and readers of the shards it syncs
 * should not share two cores with it. An idle thread still runs when the
 * CPUs are busy, just seldom; its disk I/O keeps its normal priority, so
 * a flush or an unmount is not left waiting for a quiet disk.
 */
static void lower_priority(void)
{
	struct sched_param none = { 0 };

	pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
}

static void *worker_main(void *arg)
{
	lower_priority();
	pthread_mutex_lock(&lock);
	for (;;) {
		struct job *j;

		while (!head && !stop)
			pthread_cond_wait(&cond, &lock);
		if (!head)
			break;
		if (!head_is_due()) {
			pthread_cond_timedwait(&cond, &lock, &head->due);
			continue;
		}
		j = head;
		head = j->next;
		if (!head)
			tail = NULL;
		queued--;
		busy = true;
		pthread_mutex_unlock(&lock);
		run(j);
		pthread_mutex_lock(&lock);
		busy = false;
		pthread_cond_broadcast(&cond);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/*
 * fork() copies the lock as it is and none of the threads: the child
 * starts with a lock nobody holds and no work, since the list it inherited
 * is its parent's (the parent syncs it).
 */
static void before_fork(void)
{
	pthread_mutex_lock(&lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

static void after_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	init_cond();
	head = tail = NULL;
	queued = 0;
	hurry = 0;
	busy = false;
	stop = false;
	joining = false;
	worker_pid = 0;
}

static void setup(void)
{
	init_cond();
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Starts this process's worker unless it runs. Called with lock held. */
static bool have_worker(void)
{
	if (worker_pid == getpid())
		return !stop;
	stop = false;
	if (pthread_create(&worker, NULL, worker_main, NULL))
		return false;
	worker_pid = getpid();
	return true;
}

static void ensure_setup(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, setup);
}

void dv_syncer_queue(const char *path, const char *marker)
{
	struct job *j = calloc(1, sizeof(*j));

	ensure_setup();
	if (!j || strlen(marker) >= sizeof(j->marker) ||
	    strlen(path) >= sizeof(j->path)) {
		free(j);
		dv_syncer_run(path, marker);
		return;
	}
	memcpy(j->path, path, strlen(path) + 1);
	clock_gettime(CLOCK_MONOTONIC, &j->due);
	j->due.tv_sec += SYNC_DELAY_S;
	memcpy(j->marker, marker, strlen(marker) + 1);
	pthread_mutex_lock(&lock);
	if (queued >= MAX_QUEUED || !have_worker()) {
		pthread_mutex_unlock(&lock);
		run(j);
		return;
	}
	if (tail)
		tail->next = j;
	else
		head = j;
	tail = j;
	queued++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

void dv_syncer_hold(void)
{
	ensure_setup();
	pthread_mutex_lock(&lock);
	users++;
	pthread_mutex_unlock(&lock);
}

void dv_syncer_release(void)
{
	bool join = false;

	pthread_mutex_lock(&lock);
	if (users > 0 && --users == 0 && worker_pid == getpid() && !joining) {
		stop = true;
		join = joining = true; /* one thread joins */
		pthread_cond_broadcast(&cond);
	}
	pthread_mutex_unlock(&lock);
	if (join) {
		pthread_join(worker, NULL); /* after the last job */
		pthread_mutex_lock(&lock);
		worker_pid = 0;
		joining = false;
		pthread_mutex_unlock(&lock);
	}
}

void dv_syncer_flush(void)
{
	pthread_mutex_lock(&lock);
	if (worker_pid == getpid()) {
		hurry++;
		pthread_cond_broadcast(&cond);
		while (head || busy)
			pthread_cond_wait(&cond, &lock);
		hurry--;
	}
	pthread_mutex_unlock(&lock);
}

static char boot_id[40];

static void read_boot_id(void)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(boot_id, sizeof(boot_id), f))
			boot_id[0] = '\0';
		boot_id[strcspn(boot_id, "\n")] = '\0';
		fclose(f);
	}
}

const char *dv_boot_id(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, read_boot_id);
	return boot_id;
}
