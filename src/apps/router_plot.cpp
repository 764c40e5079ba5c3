#include "router_plot.hpp"

#include <fmt/format.h>

#include <fstream>

namespace kiln::apps {

std::string routerPlotScript(const std::filesystem::path& dir, const io::DiagSummary& s) {
    if (s.router.empty() || s.routerShape.experts == 0) return "";
    const std::size_t blocks = s.routerShape.blocks, experts = s.routerShape.experts;
    const auto routerData = dir / "router.dat", expertData = dir / "experts.dat";
    {
        std::ofstream out(routerData);
        out << "# step balance_mean z_mean (over the blocks)\n";
        for (std::size_t i = 0; i < s.steps.size() && i < s.router.size(); ++i) {
            double balance = 0.0, z = 0.0;
            for (double b : s.router[i].balance) balance += b;
            for (double v : s.router[i].z) z += v;
            out << s.steps[i].step + 1 << ' ' << balance / double(blocks) << ' ' << z / double(blocks) << "\n";
        }
    }
    {
        // "step row share" triples, a blank line after each step: gnuplot's image of a regular grid.
        std::ofstream out(expertData);
        out << "# step block*experts+expert load/fair_share\n";
        for (std::size_t i = 0; i < s.steps.size() && i < s.router.size(); ++i) {
            const auto shares = io::expertShares(s.router[i], s.routerShape);
            for (std::size_t row = 0; row < shares.size(); ++row)
                out << s.steps[i].step + 1 << ' ' << row << ' ' << shares[row] << "\n";
            out << "\n";
        }
    }
    return fmt::format(
        "unset arrow\nunset label\nset autoscale y\n"
        "set output '{0}/router.png'\nset title 'routers: balance loss (1 = balanced) and z-loss, means over the blocks'\n"
        "set ylabel 'balance loss'\nset y2label 'z-loss'\nset ytics nomirror\nset y2tics\n"
        "plot '{1}' using 1:2 with lines lw 2 title 'balance', '{1}' using 1:3 axes x1y2 with lines lw 2 title 'z'\n"
        "unset y2tics\nunset y2label\nset ytics mirror\n"
        "set output '{0}/experts.png'\nset title 'tokens per expert against a fair share ({3} blocks x {4} experts)'\n"
        "set ylabel 'block x {4} + expert'\nset yrange [-0.5:{5}]\nset cblabel 'load / fair share'\n"
        "set palette defined (0 'white', 1 'grey70', 2 'orange', 4 'red')\nset cbrange [0:*]\n"
        "plot '{2}' using 1:2:3 with image notitle\n",
        dir.string(), routerData.string(), expertData.string(), blocks, experts, double(blocks * experts) - 0.5);
}

}  // namespace kiln::apps
