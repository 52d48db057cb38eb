#!/usr/bin/env bash
# Start a throw-away single-node Slurm cluster on localhost (Debian/Ubuntu packages from slurm/install.sh, run
# as root, no systemd or cgroups needed). Writes /etc/slurm/slurm.conf, starts munged, slurmctld and slurmd as
# daemons with PID files under /run, and waits until the node is idle. Stop it with slurm/cluster-down.sh.
# Idempotent: exits 0 at once when the local cluster already answers.
# Choices and their reasons: ../shared/notes/local-slurm.md (cred_expire=5 and bf_interval=1 so a requeued
# job runs again within seconds instead of two minutes; -c so no state of an earlier cluster is recovered).
set -euo pipefail

node_state() { sinfo -h -N -n localhost -o %t 2>/dev/null | sort -u; }  # one line per partition, hence sort -u

if [ -s /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null && [ "$(node_state)" = idle ]; then
  echo "local slurm cluster already up"
  exit 0
fi

NCPU=$(nproc)
# RealMemory must not exceed what slurmd detects, or the node goes INVAL/DRAIN.
MEM_MB=$(awk '/MemAvailable/ {printf "%d", $2/1024*0.9}' /proc/meminfo)

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=localcluster
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=5
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
InactiveLimit=0
MinJobAge=300
KillWait=30
Waittime=0
NodeName=localhost CPUs=${NCPU} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

# munge: Debian's postinst creates /etc/munge/munge.key; create one if it is missing.
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge /etc/munge/munge.key /run/munge
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
if ! { [ -s /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
  runuser -u munge -- /usr/sbin/munged  # daemonizes, writes /run/munge/munged.pid
fi
for _ in $(seq 1 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null

/usr/sbin/slurmctld -c         # -c: start clean, recover no state of an earlier cluster
/usr/sbin/slurmd -N localhost  # -N: the node name in slurm.conf, not `hostname`

for _ in $(seq 1 300); do
  [ "$(node_state)" = idle ] && break
  sleep 0.1
done
if [ "$(node_state)" != idle ]; then
  echo "slurm not ready: node state '$(node_state)'" >&2
  sinfo -R >&2 || true
  tail -n 50 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  exit 1
fi
sinfo
