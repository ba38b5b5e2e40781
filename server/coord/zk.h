/*
 * zk.h - the ZooKeeper backend of the coordination layer (zk.c).
 */
#ifndef ZP_ZK_H
#define ZP_ZK_H

#include "coord.h"

extern const zp_coord_ops zp_zk_ops;

#endif
