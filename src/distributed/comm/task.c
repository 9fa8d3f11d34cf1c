/* Tasks and lanes: sync_op=False work runs in order on a worker thread per
 * lane; sync work runs inline when nothing is pending (no thread hand-off
 * on the latency path). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_internal.h"

struct pd_dist_task *pd_dist_task_new(pd_status (*run)(struct pd_dist_task *),
                                      void (*cleanup)(struct pd_dist_task *), void *call) {
  struct pd_dist_task *t = calloc(1, sizeof *t);
  if (!t) {
    pd_set_error(PD_ERR_MEMORY, "distributed: out of memory for a task");
    return NULL;
  }
  t->run = run;
  t->cleanup = cleanup;
  t->call = call;
  atomic_store(&t->refs, 1);
  return t;
}

static void task_unref(struct pd_dist_task *t) {
  if (atomic_fetch_sub(&t->refs, 1) == 1) {
    if (t->cleanup) t->cleanup(t);
    free(t);
  }
}

static void execute(struct pd_dist_task *t) {
  pd_clear_error();
  t->status = t->run(t);
  if (t->status < 0) snprintf(t->err, sizeof t->err, "%s", pd_last_error());
  /* the tensors may be reused as soon as done is seen: drop our hold first */
  if (t->cleanup) {
    t->cleanup(t);
    t->cleanup = NULL;
  }
}

static void *worker_main(void *arg) {
  pd_dist_lane *l = arg;
  pd_comm_async_thread = 1;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->head && !l->stopping) pthread_cond_wait(&l->cv, &l->mu);
    if (!l->head) break;
    while (l->running) pthread_cond_wait(&l->cv, &l->mu);
    struct pd_dist_task *t = l->head;
    l->head = t->next;
    if (!l->head) l->tail = NULL;
    l->running = 1;
    pthread_mutex_unlock(&l->mu);
    execute(t);
    pthread_mutex_lock(&l->mu);
    l->running = 0;
    atomic_store(&t->done, 1);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    task_unref(t);
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

void pd_dist_lane_init(pd_dist_lane *l) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
}

void pd_dist_lane_destroy(pd_dist_lane *l) {
  pthread_mutex_lock(&l->mu);
  l->stopping = 1;
  pthread_cond_broadcast(&l->cv);
  int started = l->worker_started;
  pthread_mutex_unlock(&l->mu);
  if (started) pthread_join(l->worker, NULL);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
}

pd_status pd_dist_submit(pd_dist_group *g, int lane, struct pd_dist_task *t, pd_dist_task **out) {
  pd_dist_lane *l = &g->lanes[lane];
  t->lane = l;
  pthread_mutex_lock(&l->mu);
  if (!out && !l->head && !l->running) {
    /* sync and idle: run here */
    l->running = 1;
    pthread_mutex_unlock(&l->mu);
    execute(t);
    pthread_mutex_lock(&l->mu);
    l->running = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pd_status st = t->status;
    if (st < 0) pd_set_error(st, "%s", t->err);
    task_unref(t);
    return st;
  }
  if (!l->worker_started) {
    if (pthread_create(&l->worker, NULL, worker_main, l) != 0) {
      pthread_mutex_unlock(&l->mu);
      task_unref(t);
      return pd_set_error(PD_ERR_STATE, "distributed: cannot start the communication thread of group %d",
                          g->id);
    }
    l->worker_started = 1;
  }
  atomic_fetch_add(&t->refs, 1); /* the queue's reference */
  t->next = NULL;
  if (l->tail)
    l->tail->next = t;
  else
    l->head = t;
  l->tail = t;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  if (out) {
    *out = (pd_dist_task *)t;
    return PD_OK;
  }
  pd_status st = pd_dist_task_wait((pd_dist_task *)t);
  task_unref(t);
  return st;
}

pd_status pd_dist_task_wait(pd_dist_task *task) {
  struct pd_dist_task *t = (struct pd_dist_task *)task;
  if (!t) return pd_set_error(PD_ERR_INVALID, "task.wait: NULL task");
  if (!atomic_load(&t->done)) {
    pd_dist_lane *l = t->lane;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&t->done)) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
  }
  if (t->status < 0) return pd_set_error(t->status, "%s", t->err);
  return PD_OK;
}

bool pd_dist_task_is_completed(pd_dist_task *task) {
  struct pd_dist_task *t = (struct pd_dist_task *)task;
  return t && atomic_load(&t->done);
}

void pd_dist_task_release(pd_dist_task *task) {
  struct pd_dist_task *t = (struct pd_dist_task *)task;
  if (!t) return;
  if (!atomic_load(&t->done)) {
    pd_dist_lane *l = t->lane;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&t->done)) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
  }
  task_unref(t);
}
