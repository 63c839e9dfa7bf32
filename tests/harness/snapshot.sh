#!/bin/sh
# Test-only: print what a site.yml run could change on a host, one line per thing, sorted, so two snapshots can be
# compared (check mode must change nothing). Files (path, size, mode, owner) under the places the roles write,
# /dev/gdrdrv, loaded modules, enabled units and groups.
set -u
find /etc /opt /usr/local /var/lib/gdrcopy-ansible /lib/modules -xdev \
  \( -path /etc/ld.so.cache -o -path /etc/machine-id -o -path '/etc/ssh/*' -o -path /usr/local/src \) -prune -o \
  \( -type f -o -type l -o -type d \) -printf 'file %p %s %m %u:%g %l\n' 2>/dev/null | sort
ls -ln /dev/gdrdrv 2>/dev/null | awk '{print "dev", $1, $3, $4, $5, $6, $NF}'
cut -d' ' -f1 /proc/modules | sort | sed 's/^/module /'
getent group | cut -d: -f1 | sort | sed 's/^/group /'
