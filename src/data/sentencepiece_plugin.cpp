// SentencePiece behind a C interface, built as its own shared module and
// loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND). Why: Debian's
// libsentencepiece carries its own copy of protobuf-lite and exports its
// symbols, while libtorch links the system libprotobuf; in one global symbol
// scope the two copies bind to each other and the process crashes at start-up.
// Loaded locally with deep binding, SentencePiece sees only its own protobuf.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <string>
#include <vector>

namespace {
void copyError(const std::string& message, char* error, std::size_t errorSize) {
    if (error && errorSize > 0) {
        std::strncpy(error, message.c_str(), errorSize - 1);
        error[errorSize - 1] = '\0';
    }
}
}  // namespace

extern "C" {

void* kiln_spm_load(const char* proto, std::size_t length, char* error, std::size_t errorSize) {
    auto* processor = new sentencepiece::SentencePieceProcessor();
    const auto status = processor->LoadFromSerializedProto(std::string_view(proto, length));
    if (!status.ok()) {
        copyError(status.ToString(), error, errorSize);
        delete processor;
        return nullptr;
    }
    return processor;
}

void kiln_spm_free(void* processor) { delete static_cast<sentencepiece::SentencePieceProcessor*>(processor); }

int kiln_spm_piece_size(void* processor) { return static_cast<sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize(); }

int kiln_spm_eos_id(void* processor) { return static_cast<sentencepiece::SentencePieceProcessor*>(processor)->eos_id(); }

// Calls `sink(context, ids, n)` with the ids of `text`; returns 0 on success.
int kiln_spm_encode(void* processor, const char* text, std::size_t length, void (*sink)(void*, const int*, std::size_t),
                    void* context, char* error, std::size_t errorSize) {
    std::vector<int> ids;
    const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Encode(
        std::string_view(text, length), &ids);
    if (!status.ok()) {
        copyError(status.ToString(), error, errorSize);
        return 1;
    }
    sink(context, ids.data(), ids.size());
    return 0;
}

// Calls `sink(context, text, n)` with the decoded text; returns 0 on success.
int kiln_spm_decode(void* processor, const int* ids, std::size_t count, void (*sink)(void*, const char*, std::size_t),
                    void* context) {
    std::string text;
    const auto status =
        static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Decode(std::vector<int>(ids, ids + count), &text);
    if (!status.ok()) return 1;
    sink(context, text.data(), text.size());
    return 0;
}

int kiln_spm_train(const char* arguments, char* error, std::size_t errorSize) {
    const auto status = sentencepiece::SentencePieceTrainer::Train(arguments);
    if (!status.ok()) {
        copyError(status.ToString(), error, errorSize);
        return 1;
    }
    return 0;
}

}  // extern "C"
