/*
 * freeport.h - a loopback TCP port free right now, for a server about to
 * be started on this host (zepsctl local's ZooKeeper and metrics ports,
 * zepsctl bench's shards, the tests' endpoints).
 *
 * Picked at random below the kernel's ephemeral range (the first port of
 * /proc/sys/net/ipv4/ip_local_port_range, 32768 by default) and checked by
 * binding it: the kernel hands ports of that range to outgoing
 * connections and to bind(port 0), so a port picked there may be taken by
 * some process's connection between the pick and the server's bind (a
 * test's ZooKeeper failed to start that way); below it only an explicit
 * bind can take it.
 */
#ifndef ZP_FREEPORT_H
#define ZP_FREEPORT_H

/* The port (20000 up to the ephemeral range), never one of the last 64
 * this process picked, or -1 with errno set if none could be bound. Any
 * thread. */
int zp_freeport_pick(void);

#endif
