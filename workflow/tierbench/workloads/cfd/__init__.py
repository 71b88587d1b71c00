"""CFD: the openfoam application (OpenFOAM's solver on the duct case, or a case of your
own), its proxy cfd_proxy, and what they share: their launch, write schedule, output copy
and page-cache rule (cfd_launch), and the case and field layout the proxy writes as the
solver does (foam, foam_read, foam_write, foamcase, cfd_writer)."""
