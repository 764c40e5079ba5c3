#include "kiln/comm/ft_transport.hpp"

#include <dlfcn.h>

namespace kiln::comm {

TransportReport faultTolerantTransport() {
    // Open MPI keeps the selected PML's module in the global `mca_pml`, whose first member is its add_procs
    // function; each PML's own add_procs is exported from libmpi. Compared, they name the PML without relying
    // on anything the user set (the default selection picks ucx wherever UCX finds a device).
    const auto* selected = static_cast<void* const*>(::dlsym(RTLD_DEFAULT, "mca_pml"));
    void* const chosen = selected ? *selected : nullptr;
    const struct {
        const char* name;
        const char* symbol;
    } known[] = {{"ob1", "mca_pml_ob1_add_procs"}, {"ucx", "mca_pml_ucx_add_procs"}, {"cm", "mca_pml_cm_add_procs"}};
    std::string pml = "unknown";
    for (const auto& k : known)
        if (chosen != nullptr && ::dlsym(RTLD_DEFAULT, k.symbol) == chosen) pml = k.name;
    if (pml == "ob1") return {pml, true, ""};
    if (pml == "unknown")
        return {pml, false,
                "kiln cannot tell which transport this MPI uses; Open MPI's ULFM survives failures only on pml ob1 "
                "(set OMPI_MCA_pml=ob1)"};
    return {pml, false,
            "Open MPI's ULFM survives failures only on pml ob1; pml " + pml +
                " may hang or end the job when a node fails, instead of recovering. Set OMPI_MCA_pml=ob1 (with "
                "InfiniBand, ob1 runs over TCP/IPoIB: slower activations and sums; docs/install.md gives the cost)"};
}

}  // namespace kiln::comm
