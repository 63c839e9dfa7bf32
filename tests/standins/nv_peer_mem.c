// SPDX-License-Identifier: MIT
/*
 * Copyright (c) 2026 gdrcopy-ansible contributors
 *
 * TEST-ONLY stand-in for the deprecated Mellanox nv_peer_mem.ko, which conflicts
 * with nvidia-peermem. Built with the other stand-ins but installed only by the
 * tests that check how the nvidia_peermem role handles it. It depends on nvidia
 * like the real one. Never install it on a real machine; no role of this project does.
 */
#include <linux/module.h>
#include <linux/printk.h>

#include "nv-p2p.h"

static int __init standin_nv_peer_mem_init(void)
{
	void *put_pages = (void *)nvidia_p2p_put_pages;

	pr_info("nv_peer_mem: test-only stand-in loaded (nvidia_p2p_put_pages at %p)\n", put_pages);
	return 0;
}

static void __exit standin_nv_peer_mem_exit(void)
{
}

module_init(standin_nv_peer_mem_init);
module_exit(standin_nv_peer_mem_exit);

MODULE_DESCRIPTION("TEST-ONLY stand-in for the legacy nv_peer_mem: does nothing");
MODULE_AUTHOR("gdrcopy-ansible contributors");
MODULE_VERSION("1.3-0");
MODULE_LICENSE("Dual BSD/GPL");
