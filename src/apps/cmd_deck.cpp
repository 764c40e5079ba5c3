// kiln deck: the deck reference and a deck checker.
#include "cli_options.hpp"
#include "kiln/config/deck.hpp"
#include "kiln/config/deck_schema.hpp"
#include "kiln/arch/model_config.hpp"
#include "subcommands.hpp"

#include <fmt/format.h>

#include <sstream>

namespace kiln::apps {
namespace {

// Help text wrapped at `width` columns, indented.
std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
    std::string out = indent, word;
    std::size_t column = indent.size();
    std::istringstream in(text);
    while (in >> word) {
        if (column + word.size() + 1 > width && column > indent.size()) {
            out += "\n" + indent;
            column = indent.size();
        } else if (column > indent.size()) {
            out += ' ';
            ++column;
        }
        out += word;
        column += word.size();
    }
    return out;
}

void listKeys() {
    std::string section;
    for (const auto& key : config::deckSchema()) {
        const auto dot = key.name.find('.');
        if (key.name.substr(0, dot) != section) {
            section = key.name.substr(0, dot);
            fmt::print("\n[{}]\n", section);
        }
        fmt::print("  {:<24} {:<8} default: {}\n{}\n", key.name, config::typeName(key.type),
                   key.defaultValue.empty() ? "(empty)" : key.defaultValue, wrap(key.help, 100, "      "));
    }
}

// The resolved shape and its parameter count (once the vocabulary is known: model.vocab or the data's tokenizer).
std::string modelSummary(const config::Deck& deck) {
    if (deck.integer("model.vocab") == 0) {
        // The model's other keys are checked all the same, with a stand-in for the vocabulary the data will give.
        arch::modelConfigFromDeck(deck, /*tokenizerVocab=*/256);
        return "the vocabulary comes from the data's tokenizer (kiln plan or kiln run count the parameters)";
    }
    const auto m = arch::modelConfigFromDeck(deck, 0);
    const double millions = double(m.parameters()) / 1e6;
    // A mixture of experts: also those a token passes through.
    const std::string active = m.experts.any() ? fmt::format("; active per token {:.3g} B, exactly {}",
                                                             double(m.activeParameters()) / 1e9, m.activeParameters())
                                               : "";
    return fmt::format("{}, vocabulary {}, sequence {}: {} M parameters ({:.3g} B, exactly {}{})", m.shapeText(), m.vocabSize,
                       m.seqLen, millions < 1e4 ? fmt::format("{:.4g}", millions) : fmt::format("{:.0f}", millions),
                       double(m.parameters()) / 1e9, m.parameters(), active);
}

}  // namespace

int deckMain(int argc, char** argv) {
    po::options_description options("kiln deck");
    std::string check;
    std::vector<std::string> overrides;
    options.add_options()
        ("list", "print every deck key with its type, default and meaning")
        ("check", po::value<std::string>(&check), "read DECK, report every problem, print it resolved")
        ("set", po::value<std::vector<std::string>>(&overrides)->composing(), "override a key: --set section.key=value");
    po::positional_options_description positional;
    positional.add("check", 1);
    po::variables_map values;
    if (!parseCommandLine(argc, argv, "kiln deck --list | kiln deck --check DECK [--set k=v ...]", options, positional,
                          values))
        return 0;
    if (values.count("list")) {
        listKeys();
        return 0;
    }
    if (!check.empty()) {
        const auto deck = config::Deck::fromFile(check, overrides);
        fmt::print("{}", deck.resolvedText());
        fmt::print("\n# model: {}\n", modelSummary(deck));
        return 0;
    }
    fmt::print(stderr, "kiln deck: say --list or --check DECK (kiln deck --help)\n");
    return 2;
}

}  // namespace kiln::apps
