/* The world rendezvous: every rank learns every other rank's record (pid,
 * host identity) and one job key that names the job's shared segments.
 * Through the master endpoint over TCP (rank 0 listens), as Paddle's
 * TCPStore; under mpirun without a master, through MPI. */
#ifndef PADDLEC_DIST_RENDEZVOUS_H
#define PADDLEC_DIST_RENDEZVOUS_H

#include "paddlec/core.h"

typedef struct pd_rank_record {
  int32_t rank;
  int32_t pid;
  char host[160]; /* hostname + network namespace + boot id: equal strings = one host */
} pd_rank_record;

/* Fills this process's record. */
void pd_rank_record_self(pd_rank_record *r, int rank);

/* How long a rank waits, once connected, for the master's first bytes: a
 * paddle.c master sends them as it accepts; a port held by another program
 * stays silent (or says something else). */
#define PD_RDV_BANNER_S 3.0

/* TCP rendezvous at master ("host:port", from the variable(s) master_var,
 * named in errors); while it waits, a warning every warn_s seconds names
 * the ranks that have not joined (rank 0) or the master (the others):
 * all[i] receives rank i's record; job_key (capacity 96)
 * receives the key rank 0 made. Errors name the master and what went wrong
 * (unreachable after timeout_s, a port held by another program, a
 * duplicate rank, a world size that differs between ranks). */
pd_status pd_rendezvous_tcp(const char *master, const char *master_var, int rank, int world, double timeout_s,
                            double warn_s, const pd_rank_record *mine, pd_rank_record *all, char *job_key);

/* A fresh job key: $PADDLEC_JOB_KEY (set by fleetrun; its characters are
 * kept, so fleetrun's clean-up of /dev/shm/paddlec-<its key>* finds the
 * job's segments) or "job", then "-" and random hex. */
void pd_make_job_key(char *key, size_t cap);

#endif
