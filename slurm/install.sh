#!/usr/bin/env bash
# Install Slurm (controller, node daemon, client) and munge from Debian/Ubuntu packages. Idempotent: does
# nothing when the binaries are already there. Run as root. See slurm/README.md and slurm/cluster-up.sh.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null; then
  echo "slurm already installed: $(dpkg-query -W -f '${Version}' slurm-client 2>/dev/null || echo unknown version)"
  exit 0
fi
apt-get update
# Without systemd the postinst prints "invoke-rc.d: policy-rc.d denied execution of start": expected, harmless;
# slurm/cluster-up.sh starts the daemons itself.
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge
echo "installed slurm $(dpkg-query -W -f '${Version}' slurm-client)"
