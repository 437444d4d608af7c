#include "compare_tab.hpp"

#include <QFileInfo>
#include <QPointer>
#include <cmath>

#include "compare_analyses.hpp"
#include "compare_view.hpp"
#include "job_controller.hpp"

namespace embedlab::app {

namespace {

QVector<views::CompareToken::Alternative> alternatives(const std::vector<ComparedToken::Alternative>& top)
{
    QVector<views::CompareToken::Alternative> a;
    for (const auto& t : top)
        a.push_back({QString::fromStdString(t.piece), t.probability});
    return a;
}

views::CompareToken view_token(const ComparedToken& t)
{
    return {t.id,
            QString::fromStdString(t.text),
            QString::fromStdString(t.piece),
            t.kl,
            alternatives(t.top),
            alternatives(t.original_top)};
}

} // namespace

CompareTab::CompareTab(views::CompareView* view, JobController& jobs, RunsFn runs, CancelFn cancel,
                       QObject* parent)
    : QObject(parent), view_(view), jobs_(jobs), runs_fn_(std::move(runs)), cancel_(std::move(cancel))
{
    connect(view_, &views::CompareView::generateRequested, this, &CompareTab::generate);
    connect(view_, &views::CompareView::stopRequested, this, &CompareTab::stop);
    connect(view_, &views::CompareView::measureRequested, this, &CompareTab::measure);
    connect(view_, &views::CompareView::embedRequested, this, &CompareTab::embed);
    connect(&jobs_, &JobController::cancelled, this, [this](int id) {
        if (id == generate_job_)
            view_->finishGeneration("Stopped.");
        else if (id == text_job_ || id == embed_job_)
            view_->setStatus("Stopped.");
    });
    connect(&jobs_, &JobController::failed, this, [this](int id, const QString& message) {
        if (id == generate_job_)
            view_->finishGeneration("Failed: " + message);
        else if (id == text_job_ || id == embed_job_)
            view_->setStatus("Failed: " + message);
    });
}

void CompareTab::refreshRuns(int row)
{
    const QString was = view_->currentRun() >= 0 ? runs_.value(view_->currentRun()).name : QString();
    runs_ = runs_fn_();
    QStringList names;
    QVector<bool> encoders;
    int current = static_cast<int>(runs_.size()) - 1; // the latest, unless one is chosen
    for (int i = 0; i < runs_.size(); ++i) {
        names << runs_[i].name;
        encoders << runs_[i].encoder;
        if (runs_[i].name == was)
            current = i;
    }
    for (int i = 0; i < runs_.size(); ++i)
        if (runs_[i].row == row)
            current = i;
    view_->setRuns(names, current, encoders);
}

const CompareTab::Run* CompareTab::shownRun() const
{
    const int i = view_->currentRun();
    return i >= 0 && i < runs_.size() ? &runs_[i] : nullptr;
}

const CompareTab::Run* CompareTab::chosen()
{
    refreshRuns(-1);
    const int i = view_->currentRun();
    if (i < 0 || i >= runs_.size()) {
        view_->setStatus("No compressed run to compare: run one on the Results tab first.");
        return nullptr;
    }
    return &runs_[i];
}

bool CompareTab::refuseEncoder(const Run& run)
{
    if (!run.encoder)
        return false;
    view_->setStatus(run.name +
                     " is an encoder: it cannot generate nor predict a next token, so there is no text or KL "
                     "to compare. The Embeddings page compares its sentence embeddings before and after "
                     "compression.");
    return true;
}

int CompareTab::generate()
{
    if (view_->generating())
        return -1;
    const Run* run = chosen();
    if (!run || refuseEncoder(*run))
        return -1;
    const auto o = view_->options();
    if (o.prompt.trimmed().isEmpty()) {
        view_->setStatus("Type a prompt first.");
        return -1;
    }
    const CompareGenerationOptions options{o.prompt.toStdString(), o.max_tokens, o.temperature,
                                           static_cast<uint64_t>(o.seed)};
    view_->startGeneration(QFileInfo(QString::fromStdString(run->request.model)).fileName(), run->name);
    QPointer<views::CompareView> view = view_;
    const CompressionRequest request = run->request;
    generate_job_ = jobs_.submit(
        "compare: generate with " + run->name, [this, view, request, options](const ProgressFn& progress) {
            // Engine threads: each token is queued to the GUI thread, drawn there.
            const auto s = compare_generate(
                request, options,
                [this, view](CompareColumn column, const ComparedToken& t) {
                    const auto pane = column == CompareColumn::Original ? views::CompareView::Original
                                                                        : views::CompareView::Compressed;
                    QMetaObject::invokeMethod(
                        this,
                        [view, pane, token = view_token(t)] {
                            if (view)
                                view->appendToken(pane, token);
                        },
                        Qt::QueuedConnection);
                },
                progress);
            const QString status =
                QString("original %1 tokens, compressed %2; mean KL(original || compressed) %3 nats per "
                        "compressed token; %4")
                    .arg(s.original_tokens)
                    .arg(s.compressed_tokens)
                    .arg(s.mean_kl, 0, 'g', 3)
                    .arg(s.first_difference < 0
                             ? QString("the same text token for token")
                             : QString("they part at generated token %1").arg(s.first_difference));
            return std::function<void()>([view, status] {
                if (view)
                    view->finishGeneration(status);
            });
        });
    return generate_job_;
}

void CompareTab::stop()
{
    if (generate_job_ > 0 && view_->generating())
        cancel_(generate_job_);
}

int CompareTab::measure()
{
    const Run* run = chosen();
    if (!run || refuseEncoder(*run))
        return -1;
    const std::string text = view_->inputText().toStdString();
    if (view_->inputText().trimmed().isEmpty()) {
        view_->setStatus("Paste or open a text first.");
        return -1;
    }
    view_->setStatus("Reading the text with " + run->name + " and its original ...");
    QPointer<views::CompareView> view = view_;
    const CompressionRequest request = run->request;
    text_job_ = jobs_.submit("compare: text with " + run->name, [view, request, text, name = run->name](
                                                                    const ProgressFn& progress) {
        const auto r = compare_text(request, text, progress);
        views::CompareTextData data;
        data.run = name;
        for (const auto& t : r.tokens)
            data.tokens.push_back(view_token(t));
        for (int64_t at : r.worst)
            data.worst.push_back(static_cast<int>(at));
        data.total_tokens = static_cast<int>(r.total_tokens);
        QString status = QString("%1 tokens; mean KL(original || compressed) %2 nats per predicted token")
                             .arg(r.tokens.size())
                             .arg(r.mean_kl, 0, 'g', 3);
        if (r.total_tokens > static_cast<int64_t>(r.tokens.size()))
            status += QString(" (the first %1 of %2)").arg(r.tokens.size()).arg(r.total_tokens);
        return std::function<void()>([view, data, status] {
            if (view)
                view->setTextData(data, status);
        });
    });
    return text_job_;
}

int CompareTab::embed()
{
    const Run* run = chosen();
    if (!run)
        return -1;
    const std::string text = view_->sentencesText().toStdString();
    if (view_->sentencesText().trimmed().isEmpty()) {
        view_->setStatus("Type or paste a few sentences first, one per line.");
        return -1;
    }
    view_->setStatus("Embedding the sentences with " + run->name + " and its original ...");
    QPointer<views::CompareView> view = view_;
    const CompressionRequest request = run->request;
    embed_job_ =
        jobs_.submit("compare: embeddings with " + run->name, [view, request, text,
                                                               name = run->name](const ProgressFn& progress) {
            const auto r = compare_embeddings(request, text, progress);
            views::CompareEmbeddingData data;
            data.run = name;
            data.pooling = QString::fromStdString(r.pooling);
            data.mean_cosine = r.mean_cosine;
            data.agreement = r.neighbour_agreement;
            data.k = static_cast<int>(r.k);
            for (const auto& s : r.sentences) {
                views::CompareSentence v;
                v.text = QString::fromStdString(s.text);
                v.cosine = s.cosine;
                for (auto id : s.neighbours_original)
                    v.neighbours_original << static_cast<int>(id);
                for (auto id : s.neighbours_compressed)
                    v.neighbours_compressed << static_cast<int>(id);
                v.similarity_original =
                    QVector<double>(s.similarity_original.begin(), s.similarity_original.end());
                v.similarity_compressed =
                    QVector<double>(s.similarity_compressed.begin(), s.similarity_compressed.end());
                data.sentences << v;
            }
            const QString status = QString("%1 sentences; mean cosine of each sentence's two embeddings %2; "
                                           "their %3 nearest sentences agree %4 (1: the same)")
                                       .arg(r.sentences.size())
                                       .arg(r.mean_cosine, 0, 'f', 4)
                                       .arg(r.k)
                                       .arg(r.neighbour_agreement, 0, 'f', 3);
            return std::function<void()>([view, data, status] {
                if (view)
                    view->setEmbeddingData(data, status);
            });
        });
    return embed_job_;
}

} // namespace embedlab::app
