"""A generated fleet of 500 hosts for the report tests: made of real gdrcopy_info results (the shared H200 capture
and the H100 device capture read through gdrcopy_info, the working root of test_gdrcopy_info), renamed and spread
the way a large fleet looks - 36 red hosts of a few causes, some amber, the rest green."""

import copy

RED, AMBER = 36, 40


def fleet(h200, h100, amber, green, failed_tests):
    """hosts: name -> status.yml's data. h200 / h100: gdrcopy_info results of the captures (red, module loading
    disabled and the rest); amber: a working host with concerns; green: one without; failed_tests: verify's tests of
    a host whose gdrcopy_sanity failed."""
    hosts, red = {}, 0
    for i in range(500):
        name = "gpu-%03d" % (i + 1)
        if i % 14 == 3 and red < RED:
            kind = ("h200", "h200", "h100", "sanity", "gone")[red % 5]
            red += 1
            data = {"h200": {"info": h200}, "h100": {"info": h100},
                    "sanity": {"info": green, "verify": {"tests": failed_tests}},
                    "gone": {"verify": {"tests": failed_tests}}}[kind]
            hosts[name] = dict(copy.deepcopy(data), mode="host", _red=True)
        elif i % 12 == 5 and sum(1 for h in hosts.values() if h.get("_amber")) < AMBER:
            hosts[name] = {"info": copy.deepcopy(amber), "mode": "host", "_amber": True,
                           "pending": ["a reload of gdrdrv is pending: it was in use (gdrcopy_reload_pending)"]
                           if i % 3 == 0 else []}
        else:
            hosts[name] = {"info": copy.deepcopy(green), "mode": "host"}
    assert red == RED  # every 14th host from the 4th: 36 of 500
    for data in hosts.values():
        data.pop("_red", None)
        data.pop("_amber", None)
    return hosts
