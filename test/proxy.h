/* A fault-injecting TCP proxy for tests, on 127.0.0.1: every connection
 * made to its port is relayed to a target port, and on command it delays
 * either direction (a latency spike: a request still runs, its reply comes
 * late; or the request itself runs late), drops every connection at once,
 * cuts the next connection that carries a given request after Redis has
 * answered it (the request ran, the client sees EOF), or goes half-dead
 * (accepts and never answers). One thread per proxy
 * relays all its connections, so a peer that stops reading stalls only its
 * own proxy. The one proxy of the tests (test_chaos, test_faults, ...). */
#ifndef RLOCK_TEST_PROXY_H
#define RLOCK_TEST_PROXY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tp_proxy tp_proxy;

typedef enum tp_dir {
    TP_REQUESTS = 0, /* client -> server */
    TP_REPLIES = 1,  /* server -> client */
} tp_dir;

/* Binds a listening socket on an ephemeral 127.0.0.1 port that relays to
 * target_port. No thread yet: connections queue in the backlog until
 * tp_start(), so a process may fork() between the two. NULL on failure. */
tp_proxy *tp_new(int target_port);
/* The same, narrow: accepted (client side) sockets have the smallest
 * receive buffer and segment size the kernel allows, so that with
 * tp_stall_requests() a request of a few tens of KiB (about 40 KiB or
 * more) no longer fits in the buffers between client and proxy and the
 * client's send waits for room. Relaying still works, in small segments. */
tp_proxy *tp_new_narrow(int target_port);
/* Starts the relay thread. Returns 0, or -1 if the thread cannot start. */
int tp_start(tp_proxy *p);
int tp_port(const tp_proxy *p);
/* The listening socket, e.g. for a fork()ed child to close. */
int tp_listen_fd(const tp_proxy *p);

/* Data read in direction dir during the next window_ms is held back for
 * delay_ms (order is kept: data behind held data waits for it). */
void tp_delay(tp_proxy *p, tp_dir dir, int64_t window_ms, int64_t delay_ms);
/* Closes every relayed connection (both sides) at once. */
void tp_drop(tp_proxy *p);
/* The next connection whose request data contains needle is relayed until
 * Redis answers that request, then closed with the answer dropped. */
void tp_cut_next(tp_proxy *p, const char *needle);
/* The same for request data that starts with prefix and contains needle
 * (e.g. the RESP header of one script call and a lock name). */
void tp_cut_next_request(tp_proxy *p, const char *prefix, const char *needle);
/* Request data that contains needle, and everything after it on that
 * connection, reaches the server delay_ms late (delay_ms 0: off). */
void tp_delay_matching(tp_proxy *p, const char *needle, int64_t delay_ms);
/* on: a client that closes its connection while request data of it is held
 * back (tp_delay, tp_delay_matching) does not take that data with it: it
 * reaches the server when due, as TCP delivers what was sent before a FIN
 * (a request that timed out on the client can still run later); the
 * answers are dropped. Off (the default): closing drops held data. */
void tp_deliver_after_close(tp_proxy *p, bool on);
/* The next request that contains needle is relayed, and Redis's answer to
 * it is replaced by reply (raw RESP, e.g. "+what\r\n"): a server or proxy
 * that answers with something else. One request at a time on that
 * connection is assumed (the answer is the next data Redis sends). */
void tp_answer_next(tp_proxy *p, const char *needle, const char *reply);
/* on: requests are no longer read from clients, so they pile up in the
 * kernel's buffers until the client's sends block (a server that stops
 * reading); off: reading resumes. */
void tp_stall_requests(tp_proxy *p, bool on);
/* Closes every relayed connection with a FIN and then a reset (SO_LINGER
 * 0), as a peer that closes and drops what it was sent: a client that is
 * still sending gets EPIPE from its next send (SIGPIPE without
 * MSG_NOSIGNAL). */
void tp_reset(tp_proxy *p);

/* Half-dead link (on): every relayed connection, and every one accepted
 * from now on, swallows what it reads in both directions. TCP stays up, a
 * request never reaches the server and nothing ever answers: a proxy in
 * front of a stalled server. Off: new connections are relayed again; the
 * muted ones stay mute until closed (a client that timed out drops them). */
void tp_mute(tp_proxy *p, bool on);

/* Counters: connections accepted, connections closed by tp_drop/tp_cut/
 * tp_reset, request data held back by tp_delay_matching, answers replaced
 * by tp_answer_next. */
uint64_t tp_accepted(const tp_proxy *p);
uint64_t tp_cuts(const tp_proxy *p);
uint64_t tp_delayed(const tp_proxy *p);
uint64_t tp_answered(const tp_proxy *p);
/* Request bytes clients have sent that the proxy has not read (kernel
 * buffers), as of the relay thread's last pass (at most 200 ms old). */
uint64_t tp_unread(const tp_proxy *p);

/* Stops the thread (if started), closes everything, frees. NULL: no-op. */
void tp_free(tp_proxy *p);

#endif
