"""Which zygote spare, built ahead for earlier sessions (supervisor/sandbox.py
``prebuild``), may serve a session: ``rest_of`` is the whole decision (pure)."""

from __future__ import annotations

from paddedcell.supervisor.sandbox import Mount, Plan, profile_of, rest_of, shareable

SYSTEM = (Mount("/usr", "ro", "/usr"), Mount("/dev", "tmpfs", "mode=0755,size=64k"),
          Mount("/tmp", "tmpfs", "mode=1777,size=1m,uid=1500000000,gid=1500000000"))
OWN = (Mount("/run/user/1500000000", "tmpfs", "mode=0700,size=1m,uid=1500000000,gid=1500000000"),
       Mount("/srv/ws", "rw", "/srv/ws"), Mount("/dev/console", "dev", "/dev/pts/3"))


def plan(mounts=SYSTEM + OWN, shared=SYSTEM, **fields) -> Plan:
    values = dict(network="proxy", uid=1500000000, gid=1500000000, switch_user=True)
    values.update(fields)
    return Plan(mounts=tuple(mounts), shared=shareable(shared), **values)


def test_a_spare_adds_only_the_sessions_own_entries():
    made = profile_of(plan())
    # The shared /tmp is built without its owner (chown'd at the session): another
    # agent's uid is served by the same spare.
    assert [m for m in made["shared"] if m[0] == "/tmp"] == [["/tmp", "tmpfs", "mode=1777,size=1m"]]
    other = plan(mounts=[Mount("/usr", "ro", "/usr"), SYSTEM[1],
                         Mount("/tmp", "tmpfs", "mode=1777,size=1m,uid=1500000001,gid=1500000001"),
                         Mount("/srv/other", "rw", "/srv/other")], uid=1500000001, gid=1500000001)
    assert rest_of(made, other) == [Mount("/srv/other", "rw", "/srv/other")]
    assert rest_of(made, plan()) == list(OWN)


def test_a_spare_built_for_other_sessions_is_refused():
    made = profile_of(plan())
    assert rest_of(made, plan(network="none")) is None  # other namespaces
    assert rest_of(made, plan(switch_user=False)) is None
    assert rest_of(made, plan(mounts=SYSTEM[1:] + OWN)) is None  # /usr would show
    assert rest_of(made, plan(mounts=(*SYSTEM[:2], Mount("/tmp", "tmpfs", "size=2m"), *OWN))) is None
    assert rest_of(made, plan(mounts=SYSTEM + OWN + (Mount("/", "ro", "/"),))) is None  # covers
    own_ids = profile_of(plan(switch_user=False, uid=1000, gid=1000))
    assert rest_of(own_ids, plan(switch_user=False, uid=1001, gid=1000)) is None  # its map
    assert rest_of(own_ids, plan(switch_user=False, uid=1000, gid=1000)) == list(OWN)
