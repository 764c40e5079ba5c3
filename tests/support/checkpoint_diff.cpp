// checkpoint_diff A.h5 B.h5 KIND TOLERANCE: compares every tensor of KIND
// (params, adam_m, adam_v) of two kiln checkpoints. The criterion is the
// relative L2 difference ||a - b|| / ||b|| over the whole model; exit 0 when
// it is at most TOLERANCE, 1 when not or when the checkpoints do not hold the
// same tensors. The worst single tensor is reported too, but not judged: a
// parameter whose true gradient is zero (the attention key bias: softmax does
// not see it) gets reduction-order noise as gradient, which AdamW normalises
// into full-size steps, so that tensor alone differs between any two
// summation orders. Layout-free checkpoints make this meaningful between runs
// on different layouts.
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

using Tensors = std::map<std::string, std::vector<float>>;

herr_t collect(hid_t group, const char* name, const H5L_info_t*, void* data) {
    auto* out = static_cast<std::pair<std::string, Tensors*>*>(data);
    const hid_t set = H5Dopen2(group, name, H5P_DEFAULT);
    if (set < 0) return -1;
    const hid_t space = H5Dget_space(set);
    std::vector<float> values(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
    const herr_t rc = values.empty() ? 0 : H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Sclose(space);
    H5Dclose(set);
    (*out->second)[out->first + "/" + name] = std::move(values);
    return rc < 0 ? -1 : 0;
}

bool read(const char* path, const std::string& kind, Tensors& tensors) {
    const hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return false;
    const hid_t layers = H5Gopen2(file, "layers", H5P_DEFAULT);
    H5G_info_t info;
    bool ok = layers >= 0 && H5Gget_info(layers, &info) >= 0;
    for (hsize_t i = 0; ok && i < info.nlinks; ++i) {
        char layer[64];
        H5Lget_name_by_idx(layers, ".", H5_INDEX_NAME, H5_ITER_INC, i, layer, sizeof(layer), H5P_DEFAULT);
        const std::string group = std::string(layer) + "/" + kind;
        const hid_t g = H5Gopen2(layers, group.c_str(), H5P_DEFAULT);
        std::pair<std::string, Tensors*> context{group, &tensors};
        ok = g >= 0 && H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &context) >= 0;
        if (g >= 0) H5Gclose(g);
    }
    if (layers >= 0) H5Gclose(layers);
    H5Fclose(file);
    return ok && !tensors.empty();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: checkpoint_diff A.h5 B.h5 params|adam_m|adam_v TOLERANCE\n");
        return 2;
    }
    const std::string kind = argv[3];
    const double tolerance = std::atof(argv[4]);
    Tensors a, b;
    if (!read(argv[1], kind, a) || !read(argv[2], kind, b)) {
        std::printf("checkpoint_diff: cannot read %s tensors of %s or %s\n", kind.c_str(), argv[1], argv[2]);
        return 1;
    }
    if (a.size() != b.size()) {
        std::printf("checkpoint_diff: %zu %s tensors against %zu\n", a.size(), kind.c_str(), b.size());
        return 1;
    }
    double worst = 0.0, allDiff = 0.0, allNorm = 0.0;
    std::string where;
    for (const auto& [name, values] : a) {
        const auto it = b.find(name);
        if (it == b.end() || it->second.size() != values.size()) {
            std::printf("checkpoint_diff: %s is missing or differs in size in %s\n", name.c_str(), argv[2]);
            return 1;
        }
        double diff = 0.0, norm = 0.0;
        for (std::size_t i = 0; i < values.size(); ++i) {
            diff += std::pow(double(values[i]) - double(it->second[i]), 2);
            norm += std::pow(double(it->second[i]), 2);
        }
        allDiff += diff;
        allNorm += norm;
        const double relative = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
        if (relative >= worst) {
            worst = relative;
            where = name;
        }
    }
    const double whole = allNorm > 0 ? std::sqrt(allDiff / allNorm) : std::sqrt(allDiff);
    std::printf("checkpoint_diff %s: %zu tensors, relative difference %.3g (largest single tensor %.3g, %s), "
                "tolerance %.3g: %s\n",
                kind.c_str(), a.size(), whole, worst, where.c_str(), tolerance, whole <= tolerance ? "SAME" : "DIFFERENT");
    return whole <= tolerance ? 0 : 1;
}
