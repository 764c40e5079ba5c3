// Pre-tokenized inputs of kiln prep (--format tokens): corpora tokenized
// elsewhere, whose ids go into the shards unchanged.
//   Megatron-LM indexed datasets: PREFIX.idx (MMIDIDX, version 1) with
//     PREFIX.bin, any of its integer dtypes; its documents are kiln's.
//   .npy: a 1-D array of integer ids, documents separated by the EOS id.
//   llm.c / nanoGPT .bin with llm.c's header (magic 20240520; version 1:
//     uint16 ids, 2: uint32), documents separated by the EOS id.
//   Headerless files of ids (nanoGPT's prepare.py train.bin), their type
//     given (--token-dtype), documents separated by the EOS id.
// kiln's loader puts the EOS between documents itself, so a document's
// trailing EOS (Megatron's --append-eod) and the separators are not stored:
// the training stream is the same ids.
#pragma once

#include "kiln/data/document_source.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::data {

// The units of the pre-tokenized `files` (directories already expanded): a
// Megatron dataset in runs of documents of about `splitBytes` of ids (its
// .idx names it; a .bin beside an .idx is that dataset's, not a file of its
// own), a flat file in runs of `splitBytes` of ids. WorkUnit::begin/end are
// document indices of a Megatron dataset, id indices of a flat file, whose
// unit holds the documents that start in it. `rawType` (empty: none) is the
// id type of files without a header ("uint16", "int32", ...).
std::vector<WorkUnit> planTokenUnits(const std::vector<std::string>& files, std::uint64_t splitBytes,
                                     const std::string& rawType = {});

class TokenDocumentReader {
public:
    // Every id must be below `vocabSize`; `eos` separates the documents of flat files.
    TokenDocumentReader(const WorkUnit& unit, std::uint32_t eos, std::uint32_t vocabSize,
                        const std::string& rawType = {});
    ~TokenDocumentReader();
    // The next document's ids (possibly empty: an empty document; a Megatron
    // document with the EOD it ends with, if it has one), or false at
    // the end. An id outside the vocabulary is an InputError naming the file,
    // the document and the value.
    bool next(std::vector<std::uint32_t>& document);
    // "file: document N" (Megatron) or "file: ids [a, b)" of the last document.
    std::string location() const;
    // Bytes of the unit's files consumed so far.
    std::uint64_t consumed() const;

private:
    struct Source;
    std::unique_ptr<Source> source_;
};

}  // namespace kiln::data
