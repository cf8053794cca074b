/*
 * check_rmeta_engine — the engine both remote providers hold their
 * metadata queue in (providers/rmeta_engine.c), driven with an apply slot
 * that records each batch and can be held inside apply: a flush by need
 * waits only for ops of its path, an op added during a flush waits for
 * the next one, the batch in flight still shows in the answers, the
 * timer applies the queue after its delay, stop applies what waits, a
 * full queue is applied at once, a lane not asked for forces nothing, and
 * a rename takes the attributes of its file along.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/sysutil.h"
#include "rmeta_engine.h"

/* What the apply slot saw, and the gate that can hold it. */
static struct rec {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool hold;	      /* apply waits while set */
	bool in_apply;	      /* a batch is inside apply */
	int n_batches;	      /* batches applied */
	struct sbx_buf last;  /* "P P ...|N N ..." of the last batch: script lane | native */
	struct sbx_buf modes; /* the native lane's chmod modes of the last batch, in order */
	int befores, afters;
} r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static void add_paths(struct sbx_buf *b, const struct sbx_rmq_queue *q)
{
	for (size_t i = 0; i < q->n; i++)
		sbx_buf_addf(b, "%s%s", i ? " " : "", q->ops[i].path);
}

static void apply(void *ctx, const struct sbx_rme_batch *b)
{
	(void)ctx;
	pthread_mutex_lock(&r.mu);
	r.in_apply = true;
	pthread_cond_broadcast(&r.cv);
	while (r.hold)
		pthread_cond_wait(&r.cv, &r.mu);
	sbx_buf_reset(&r.last);
	add_paths(&r.last, &b->q);
	sbx_buf_adds(&r.last, "|");
	add_paths(&r.last, &b->native);
	sbx_buf_reset(&r.modes);
	for (size_t i = 0; i < b->native.n; i++)
		if (b->native.ops[i].kind == SBX_RMQ_CHMOD)
			sbx_buf_addf(&r.modes, "%s%o", r.modes.len ? " " : "",
				     (unsigned)b->native.ops[i].mode);
	r.n_batches++;
	r.in_apply = false;
	pthread_cond_broadcast(&r.cv);
	pthread_mutex_unlock(&r.mu);
}

static void count(int *n)
{
	pthread_mutex_lock(&r.mu);
	(*n)++;
	pthread_mutex_unlock(&r.mu);
}

static void before(void *ctx, const struct sbx_rme_batch *b)
{
	count(&r.befores);
}

static void after(void *ctx, const struct sbx_rme_batch *b)
{
	count(&r.afters);
}

static struct sbx_rme_slots slots = {
    .apply = apply, .before = before, .after = after, .max_ops = 100};

static void setup(void)
{
	pthread_mutex_lock(&r.mu);
	r.hold = r.in_apply = false;
	r.n_batches = r.befores = r.afters = 0;
	sbx_buf_reset(&r.last);
	pthread_mutex_unlock(&r.mu);
	slots.delay_ms = 0;
	slots.max_ops = 100;
}

static void teardown(void)
{
	sbx_buf_release(&r.last);
}

static int batches(void)
{
	pthread_mutex_lock(&r.mu);
	int n = r.n_batches;
	pthread_mutex_unlock(&r.mu);
	return n;
}

/* The last batch as "script|native" (copied into out). */
static const char *last(char *out, size_t size)
{
	pthread_mutex_lock(&r.mu);
	snprintf(out, size, "%s", r.last.buf ? r.last.buf : "");
	pthread_mutex_unlock(&r.mu);
	return out;
}

static void hold(bool on)
{
	pthread_mutex_lock(&r.mu);
	r.hold = on;
	pthread_cond_broadcast(&r.cv);
	pthread_mutex_unlock(&r.mu);
}

static void wait_in_apply(void)
{
	pthread_mutex_lock(&r.mu);
	while (!r.in_apply)
		pthread_cond_wait(&r.cv, &r.mu);
	pthread_mutex_unlock(&r.mu);
}

static void add_chmod(struct sbx_rme *e, const char *path, mode_t mode)
{
	struct sbx_rmq_op op = {.kind = SBX_RMQ_CHMOD, .path = (char *)path, .mode = mode};
	sbx_rme_add(e, SBX_RME_SCRIPT, &op, 1);
}

static void add_symlink(struct sbx_rme *e, const char *target, const char *path)
{
	struct sbx_rmq_op op = {
	    .kind = SBX_RMQ_SYMLINK, .path = (char *)path, .arg = (char *)target};
	sbx_rme_add(e, SBX_RME_SCRIPT, &op, 1);
}

/* A flush in a thread of its own (it may wait for the batch in flight). */
struct flusher {
	struct sbx_rme *e;
	const char *path;
	enum sbx_rmq_need need;
	pthread_t t;
	bool done; /* under r.mu */
};

static void *flusher_main(void *arg)
{
	struct flusher *f = arg;
	sbx_rme_flush(f->e, f->path, f->need, SBX_RME_BOTH);
	pthread_mutex_lock(&r.mu);
	f->done = true;
	pthread_cond_broadcast(&r.cv);
	pthread_mutex_unlock(&r.mu);
	return NULL;
}

static void flusher_start(struct flusher *f, struct sbx_rme *e, const char *path,
			  enum sbx_rmq_need need)
{
	*f = (struct flusher){.e = e, .path = path, .need = need};
	ck_assert_int_eq(pthread_create(&f->t, NULL, flusher_main, f), 0);
}

static bool flusher_done(struct flusher *f)
{
	pthread_mutex_lock(&r.mu);
	bool d = f->done;
	pthread_mutex_unlock(&r.mu);
	return d;
}

/*
 * A flush for one path applies everything waiting, once; one for a path
 * nothing waits for sends nothing, even while a batch is in flight, and
 * one for a path of that batch waits for it.
 */
START_TEST(test_flush_by_need)
{
	struct sbx_rme e;
	struct flusher f, g;
	char buf[256];
	sbx_rme_init(&e, &slots, NULL);
	sbx_rme_flush(&e, "/a", SBX_RMQ_NEED_NEAR, SBX_RME_BOTH); /* nothing queued */
	ck_assert_int_eq(batches(), 0);
	add_chmod(&e, "/a", 0600);
	add_chmod(&e, "/b", 0600);
	sbx_rme_flush(&e, "/c", SBX_RMQ_NEED_NEAR, SBX_RME_BOTH); /* nothing of /c */
	ck_assert_int_eq(batches(), 0);

	hold(true);
	flusher_start(&f, &e, "/a", SBX_RMQ_NEED_NEAR);
	wait_in_apply();
	/* /a and /b are in flight: a flush for /c returns without waiting */
	sbx_rme_flush(&e, "/c", SBX_RMQ_NEED_NEAR, SBX_RME_BOTH);
	ck_assert(!flusher_done(&f));
	/* one for /b waits for the batch in flight, and sends nothing of its own */
	flusher_start(&g, &e, "/b", SBX_RMQ_NEED_NEAR);
	usleep(100 * 1000);
	ck_assert(!flusher_done(&g));
	hold(false);
	pthread_join(f.t, NULL);
	pthread_join(g.t, NULL);
	ck_assert_int_eq(batches(), 1);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/a /b|");
	ck_assert_int_eq(r.befores, 1);
	ck_assert_int_eq(r.afters, 1);
	sbx_rme_destroy(&e);
}
END_TEST

/* An op added while a batch is applied is neither in it nor lost: the next flush applies it. */
START_TEST(test_add_during_flush)
{
	struct sbx_rme e;
	struct flusher f;
	char buf[256];
	sbx_rme_init(&e, &slots, NULL);
	add_chmod(&e, "/a", 0600);
	hold(true);
	flusher_start(&f, &e, NULL, SBX_RMQ_NEED_ALL);
	wait_in_apply();
	add_chmod(&e, "/d", 0644);
	hold(false);
	pthread_join(f.t, NULL);
	ck_assert_int_eq(batches(), 1);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/a|");
	ck_assert(sbx_rme_touches(&e, "/d", false, SBX_RME_BOTH));
	sbx_rme_flush(&e, "/d", SBX_RMQ_NEED_NEAR, SBX_RME_BOTH);
	ck_assert_int_eq(batches(), 2);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/d|");
	ck_assert(!sbx_rme_touches(&e, "/d", false, SBX_RME_BOTH));
	sbx_rme_destroy(&e);
}
END_TEST

/* While a batch is applied, its ops still answer: overlay, link target, fate, touches. */
START_TEST(test_inflight_answers)
{
	struct sbx_rme e;
	struct flusher f;
	struct sbx_stat st = {.mode = S_IFREG | 0644};
	struct sbx_rmq_op rm = {.kind = SBX_RMQ_UNLINK, .path = "/gone"};
	struct sbx_rmq_op own = {.kind = SBX_RMQ_CHOWN, .path = "/n", .uid = 7, .gid = (gid_t)-1};
	char t[64];
	sbx_rme_init(&e, &slots, NULL);
	add_chmod(&e, "/a", 0600);
	add_symlink(&e, "target", "/l");
	sbx_rme_add(&e, SBX_RME_SCRIPT, &rm, 1);
	sbx_rme_add(&e, SBX_RME_NATIVE, &own, 1);
	hold(true);
	flusher_start(&f, &e, NULL, SBX_RMQ_NEED_ALL);
	wait_in_apply();
	sbx_rme_overlay(&e, "/a", &st);
	ck_assert_int_eq(st.mode, S_IFREG | 0600);
	st.uid = 0;
	sbx_rme_overlay(&e, "/n", &st); /* the native lane too */
	ck_assert_int_eq(st.uid, 7);
	ck_assert(sbx_rme_link_target(&e, "/l", t, sizeof(t)));
	ck_assert_str_eq(t, "target");
	ck_assert_int_eq(sbx_rme_fate(&e, "/gone"), SBX_RMQ_GONE);
	ck_assert_int_eq(sbx_rme_fate(&e, "/l"), SBX_RMQ_MADE);
	ck_assert(sbx_rme_touches(&e, "/a", false, SBX_RME_SCRIPT));
	ck_assert(!sbx_rme_touches(&e, "/a", false, SBX_RME_NATIVE));
	/* a later op of the same path, waiting, is laid over the one in flight */
	add_chmod(&e, "/a", 0640);
	st.mode = S_IFREG | 0644;
	sbx_rme_overlay(&e, "/a", &st);
	ck_assert_int_eq(st.mode, S_IFREG | 0640);
	hold(false);
	pthread_join(f.t, NULL);
	/* applied: only the waiting chmod of /a is left */
	ck_assert(!sbx_rme_link_target(&e, "/l", t, sizeof(t)));
	ck_assert_int_eq(sbx_rme_fate(&e, "/gone"), SBX_RMQ_UNTOUCHED);
	st.uid = 0;
	sbx_rme_overlay(&e, "/n", &st);
	ck_assert_int_eq(st.uid, 0);
	sbx_rme_destroy(&e);
}
END_TEST

/* The timer applies the queue delay_ms after the last op, not before. */
START_TEST(test_timer)
{
	struct sbx_rme e;
	long long t0;
	char buf[256];
	slots.delay_ms = 300;
	sbx_rme_init(&e, &slots, NULL);
	t0 = sbx_now_ms();
	add_chmod(&e, "/a", 0600);
	usleep(150 * 1000);
	add_chmod(&e, "/b", 0600); /* restarts the delay */
	usleep(150 * 1000);
	if (sbx_now_ms() - t0 < 400) /* else the machine stalled: the check proves nothing */
		ck_assert_int_eq(batches(), 0);
	for (int i = 0; i < 100 && !batches(); i++)
		usleep(50 * 1000);
	ck_assert_int_eq(batches(), 1);
	ck_assert_int_ge(sbx_now_ms() - t0, 150 + 300);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/a /b|");
	sbx_rme_destroy(&e);
}
END_TEST

/* Stop applies what waits; after it, no timer runs (destroy frees what is added). */
START_TEST(test_stop_applies)
{
	struct sbx_rme e;
	char buf[256];
	slots.delay_ms = 60000;
	sbx_rme_init(&e, &slots, NULL);
	add_chmod(&e, "/a", 0600);
	ck_assert_int_eq(batches(), 0);
	sbx_rme_stop(&e);
	ck_assert_int_eq(batches(), 1);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/a|");
	add_chmod(&e, "/b", 0600);
	ck_assert_int_eq(sbx_rme_drop(&e), 1);
	sbx_rme_flush(&e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
	ck_assert_int_eq(batches(), 1);
	add_chmod(&e, "/c", 0600);
	sbx_rme_destroy(&e); /* not applied, not leaked */
	ck_assert_int_eq(batches(), 1);
}
END_TEST

static size_t cost_ten(const struct sbx_rmq_op *op, bool native)
{
	return 10;
}

static bool full_two_native_paths(const struct sbx_rme_batch *b)
{
	return b->n_native_paths >= 2 || b->n_removals >= 2;
}

/* A full queue is applied by the add that fills it (the default rule, and a slot's). */
START_TEST(test_full)
{
	struct sbx_rme e;
	struct sbx_rmq_op p = {.kind = SBX_RMQ_CHOWN, .uid = 1, .gid = (gid_t)-1};
	char buf[256];
	slots.max_ops = 3;
	sbx_rme_init(&e, &slots, NULL);
	add_chmod(&e, "/a", 0600);
	add_chmod(&e, "/b", 0600);
	ck_assert_int_eq(batches(), 0);
	add_chmod(&e, "/c", 0600);
	ck_assert_int_eq(batches(), 1);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/a /b /c|");
	sbx_rme_destroy(&e);

	slots.full = full_two_native_paths;
	slots.cost = cost_ten;
	sbx_rme_init(&e, &slots, NULL);
	p.path = "/x";
	sbx_rme_add(&e, SBX_RME_NATIVE, &p, 1);
	sbx_rme_add(&e, SBX_RME_NATIVE, &p, 1); /* the same path: still one, costed once */
	ck_assert_int_eq(batches(), 1);
	ck_assert_uint_eq(e.pending.bytes, 10);
	p.path = "/y";
	sbx_rme_add(&e, SBX_RME_NATIVE, &p, 1);
	ck_assert_int_eq(batches(), 2);
	ck_assert_str_eq(last(buf, sizeof(buf)), "|/x /x /y");
	slots.full = NULL;
	slots.cost = NULL;
	sbx_rme_destroy(&e);
}
END_TEST

/* A flush asking for the script lane only leaves a native op of the path waiting. */
START_TEST(test_lanes)
{
	struct sbx_rme e;
	struct sbx_rmq_op p = {.kind = SBX_RMQ_CHMOD, .path = "/a", .mode = 0600};
	char buf[256];
	sbx_rme_init(&e, &slots, NULL);
	sbx_rme_add(&e, SBX_RME_NATIVE, &p, 1);
	sbx_rme_flush(&e, "/a", SBX_RMQ_NEED_NEAR, SBX_RME_SCRIPT);
	ck_assert_int_eq(batches(), 0);
	sbx_rme_flush(&e, "/a", SBX_RMQ_NEED_NEAR, SBX_RME_NATIVE);
	ck_assert_int_eq(batches(), 1);
	ck_assert_str_eq(last(buf, sizeof(buf)), "|/a");
	sbx_rme_destroy(&e);
}
END_TEST

/*
 * rsync's temporary: its chmod (script lane) and chown (native lane) are
 * taken out for the rename and queued again on the new name, so the
 * rename applies nothing; what else waits stays in its place. Not taken:
 * an op below a directory renamed, one on the new name, a symlink made at
 * the old name, or anything while a batch in flight holds either name.
 */
START_TEST(test_rename_take)
{
	struct sbx_rme e;
	struct sbx_rme_batch held;
	struct sbx_rmq_op own = {.kind = SBX_RMQ_CHOWN, .path = "/d/.f.X", .uid = 0, .gid = 0};
	struct flusher f;
	char buf[256];
	sbx_rme_init(&e, &slots, NULL);
	ck_assert(!sbx_rme_rename_take(&e, "/d/.f.X", "/d/f", &held)); /* nothing to take */
	add_chmod(&e, "/other", 0600);
	add_chmod(&e, "/d/.f.X", 0600);
	sbx_rme_add(&e, SBX_RME_NATIVE, &own, 1);
	ck_assert(sbx_rme_rename_take(&e, "/d/.f.X", "/d/f", &held));
	ck_assert(!sbx_rme_touches(&e, "/d/.f.X", true, SBX_RME_BOTH));
	sbx_rme_rename_done(&e, &held, "/d/f");
	ck_assert(sbx_rme_touches(&e, "/d/f", false, SBX_RME_SCRIPT));
	ck_assert(sbx_rme_touches(&e, "/d/f", false, SBX_RME_NATIVE));
	ck_assert_int_eq(batches(), 0);
	sbx_rme_flush(&e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/other /d/f|/d/f");

	/* a failed move: sbx_rme_rename_done puts them back on the old name */
	add_chmod(&e, "/a", 0600);
	ck_assert(sbx_rme_rename_take(&e, "/a", "/b", &held));
	sbx_rme_rename_done(&e, &held, "/a");
	sbx_rme_flush(&e, "/a", SBX_RMQ_NEED_NEAR, SBX_RME_BOTH);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/a|");

	add_chmod(&e, "/dir", 0700);
	add_chmod(&e, "/dir/x", 0600);
	ck_assert(!sbx_rme_rename_take(&e, "/dir", "/dir2", &held)); /* below it */
	add_chmod(&e, "/c", 0600);
	add_chmod(&e, "/e", 0600);
	ck_assert(!sbx_rme_rename_take(&e, "/c", "/e", &held)); /* on the new name */
	add_symlink(&e, "t", "/s");
	add_chmod(&e, "/s", 0600);
	ck_assert(!sbx_rme_rename_take(&e, "/s", "/s2", &held)); /* not attributes only */
	sbx_rme_flush(&e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);

	hold(true);
	add_chmod(&e, "/g", 0600);
	flusher_start(&f, &e, NULL, SBX_RMQ_NEED_ALL);
	wait_in_apply();
	add_chmod(&e, "/g", 0644);
	ck_assert(!sbx_rme_rename_take(&e, "/g", "/h", &held)); /* /g in flight */
	hold(false);
	pthread_join(f.t, NULL);
	ck_assert(sbx_rme_rename_take(&e, "/g", "/h", &held));
	sbx_rme_rename_done(&e, &held, "/h");
	sbx_rme_destroy(&e);
}
END_TEST

/* git's object: the native chmod of the temporary follows the link to the object's name. */
START_TEST(test_follow_link)
{
	struct sbx_rme e;
	struct sbx_rmq_op ch = {.kind = SBX_RMQ_CHMOD, .path = "/o/tmp", .mode = 0444};
	struct sbx_rmq_op ln = {.kind = SBX_RMQ_LINK, .path = "/o/obj", .arg = "/o/tmp"};
	char buf[256];
	sbx_rme_init(&e, &slots, NULL);
	sbx_rme_add(&e, SBX_RME_NATIVE, &ch, 1);
	ck_assert(!sbx_rme_follow_link(&e, "/o/tmp")); /* no link: apply first */
	sbx_rme_add(&e, SBX_RME_SCRIPT, &ln, 1);
	ck_assert(sbx_rme_follow_link(&e, "/o/tmp"));
	ck_assert(!sbx_rme_touches(&e, "/o/tmp", false, SBX_RME_NATIVE));
	ck_assert(sbx_rme_touches(&e, "/o/obj", false, SBX_RME_NATIVE));
	sbx_rme_flush(&e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
	ck_assert_int_eq(batches(), 1);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/o/obj|/o/obj");
	/* not to a name removed again before the batch: the chmod would meet nothing */
	struct sbx_rmq_op rm = {.kind = SBX_RMQ_UNLINK, .path = "/o/obj"};
	sbx_rme_add(&e, SBX_RME_NATIVE, &ch, 1);
	sbx_rme_add(&e, SBX_RME_SCRIPT, &ln, 1);
	sbx_rme_add(&e, SBX_RME_SCRIPT, &rm, 1);
	ck_assert(!sbx_rme_follow_link(&e, "/o/tmp"));
	sbx_rme_destroy(&e);
}
END_TEST

/* create a, link a b, chmod b 201, unlink a: b ends 201, not a's older 644. */
START_TEST(test_follow_link_keeps_order)
{
	struct sbx_rme e;
	struct sbx_rmq_op cha = {.kind = SBX_RMQ_CHMOD, .path = "/g/a", .mode = 0644};
	struct sbx_rmq_op ln = {.kind = SBX_RMQ_LINK, .path = "/g/b", .arg = "/g/a"};
	struct sbx_rmq_op chb = {.kind = SBX_RMQ_CHMOD, .path = "/g/b", .mode = 0201};
	char buf[256];
	sbx_rme_init(&e, &slots, NULL);
	sbx_rme_add(&e, SBX_RME_NATIVE, &cha, 1);
	sbx_rme_add(&e, SBX_RME_SCRIPT, &ln, 1);
	sbx_rme_add(&e, SBX_RME_NATIVE, &chb, 1);
	ck_assert(sbx_rme_follow_link(&e, "/g/a"));
	sbx_rme_flush(&e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH);
	ck_assert_str_eq(last(buf, sizeof(buf)), "/g/b|/g/b /g/b");
	pthread_mutex_lock(&r.mu);
	ck_assert_str_eq(r.modes.buf, "644 201");
	pthread_mutex_unlock(&r.mu);
	sbx_rme_destroy(&e);
}
END_TEST

/*
 * A view taken before a remote request still shows the ops of a batch
 * applied and cleared while the request was out (its answer may be older
 * than the apply), then what was queued since.
 */
START_TEST(test_view)
{
	struct sbx_rme e;
	struct sbx_rmq_queue view;
	struct sbx_stat st = {.mode = S_IFREG | 0644};
	sbx_rme_init(&e, &slots, NULL);
	add_chmod(&e, "/d/f", 0600);
	add_chmod(&e, "/elsewhere", 0700);
	sbx_rme_view(&e, "/d", false, &view); /* a listing of /d */
	ck_assert_uint_eq(view.n, 1);
	sbx_rme_flush(&e, NULL, SBX_RMQ_NEED_ALL, SBX_RME_BOTH); /* applied meanwhile */
	sbx_rme_overlay(&e, "/d/f", &st);
	ck_assert_uint_eq(st.mode & 07777, 0644); /* the queue alone has forgotten it */
	sbx_rme_overlay_view(&e, &view, "/d/f", &st);
	ck_assert_uint_eq(st.mode & 07777, 0600);
	add_chmod(&e, "/d/f", 0640); /* queued after the view: newer, shown last */
	sbx_rme_overlay_view(&e, &view, "/d/f", &st);
	ck_assert_uint_eq(st.mode & 07777, 0640);
	sbx_rmq_clear(&view);
	sbx_rme_destroy(&e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rmeta_engine");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_flush_by_need);
	tcase_add_test(tc, test_add_during_flush);
	tcase_add_test(tc, test_inflight_answers);
	tcase_add_test(tc, test_timer);
	tcase_add_test(tc, test_stop_applies);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_lanes);
	tcase_add_test(tc, test_rename_take);
	tcase_add_test(tc, test_follow_link);
	tcase_add_test(tc, test_follow_link_keeps_order);
	tcase_add_test(tc, test_view);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
