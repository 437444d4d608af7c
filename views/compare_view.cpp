#include "compare_view.hpp"

#include <QAbstractTextDocumentLayout>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextEdit>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "token_text.hpp"

namespace embedlab::views {

namespace {

constexpr int kEmbeddingsPage = 2; // the modes' third page

QColor mix(const QColor& a, const QColor& b, double t)
{
    return QColor::fromRgbF(a.redF() + (b.redF() - a.redF()) * t, a.greenF() + (b.greenF() - a.greenF()) * t,
                            a.blueF() + (b.blueF() - a.blueF()) * t);
}

QString percent(double p)
{
    return QString::number(100 * p, 'f', p >= 0.1 ? 1 : 2) + "%";
}

QTextEdit* token_pane(QWidget* parent)
{
    auto* pane = new QTextEdit(parent);
    pane->setReadOnly(true);
    pane->setMinimumSize(240, 160);
    return pane;
}

} // namespace

QColor CompareView::klColour(double kl)
{
    if (std::isnan(kl))
        return {};
    // 0.001 nats (no visible change) .. 1 nat (another distribution), log scale.
    const double t = std::clamp(std::log10(std::max(kl, 1e-12) / 1e-3) / 3, 0.0, 1.0);
    const QColor pale(247, 247, 247), yellow(254, 224, 139), red(215, 48, 39);
    return t < 0.5 ? mix(pale, yellow, t / 0.5) : mix(yellow, red, (t - 0.5) / 0.5);
}

CompareView::CompareView(QWidget* parent)
    : QWidget(parent), modes_(new QTabWidget(this)), runs_(new QComboBox(this)), prompt_(new QLineEdit(this)),
      max_tokens_(new QSpinBox(this)), temperature_(new QDoubleSpinBox(this)), seed_(new QSpinBox(this)),
      generate_(new QPushButton("Generate", this)), stop_(new QPushButton("Stop", this)),
      generate_status_(new QLabel(this)), input_(new QPlainTextEdit(this)),
      measure_(new QPushButton("Colour by KL", this)), worst_(new QListWidget(this)),
      text_status_(new QLabel(this))
{
    for (int p = 0; p < 3; ++p) {
        panes_[p] = token_pane(this);
        panes_[p]->viewport()->installEventFilter(this);
        panes_[p]->setObjectName(QStringList{"compare_original", "compare_compressed", "compare_text"}[p]);
    }
    runs_->setObjectName("compare_run");
    prompt_->setObjectName("compare_prompt");
    worst_->setObjectName("compare_worst");
    auto* note = new QLabel(
        "<b>What am I seeing.</b> A compressed model beside its original. <i>Generate</i>: both continue the "
        "prompt with the same seed; each compressed token's background is KL(P<sub>original</sub> || "
        "P<sub>compressed</sub>) of the two next-token distributions at that step. <i>Text</i>: each token's "
        "background is the KL of the prediction that reads it. Hover a token for both models' top-5. "
        "<i>Embeddings</i> (an encoder's, which cannot generate): each sentence's cosine between its two "
        "embeddings and its nearest other sentences under each model.",
        this);
    note->setWordWrap(true);
    QString legend = "KL (nats): ";
    for (double kl : {0.001, 0.01, 0.03, 0.1, 0.3, 1.0})
        legend += QString("<span style='background-color:%1'>&nbsp;%2&nbsp;</span> ")
                      .arg(klColour(kl).name(), QString::number(kl));
    auto* key = new QLabel(legend, this);
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel("Compressed run:", this));
    top->addWidget(runs_, 1);
    top->addWidget(key);

    prompt_->setPlaceholderText("Prompt (Return generates)");
    prompt_->setText("Once upon a time");
    max_tokens_->setPrefix("max tokens ");
    max_tokens_->setRange(1, 1024);
    max_tokens_->setValue(48);
    temperature_->setPrefix("temperature ");
    temperature_->setRange(0, 5);
    temperature_->setSingleStep(0.1);
    temperature_->setToolTip("0: greedy (the most likely token)");
    seed_->setPrefix("seed ");
    seed_->setRange(0, 1 << 30);
    stop_->setEnabled(false);
    auto* controls = new QHBoxLayout;
    for (QWidget* w :
         std::initializer_list<QWidget*>{prompt_, max_tokens_, temperature_, seed_, generate_, stop_})
        controls->addWidget(w, w == prompt_ ? 1 : 0);
    auto* columns = new QSplitter(Qt::Horizontal, this);
    columns->setChildrenCollapsible(false);
    for (int p = 0; p < 2; ++p) {
        auto* box = new QWidget(this);
        auto* v = new QVBoxLayout(box);
        v->setContentsMargins(0, 0, 0, 0);
        titles_[p] = new QLabel(p == 0 ? "original" : "compressed", this);
        v->addWidget(titles_[p]);
        v->addWidget(panes_[p], 1);
        columns->addWidget(box);
    }
    auto* generate_page = new QWidget(this);
    auto* g = new QVBoxLayout(generate_page);
    g->addLayout(controls);
    g->addWidget(columns, 1);
    g->addWidget(generate_status_);

    input_->setPlaceholderText("Paste a text here, or open a file");
    input_->setMaximumHeight(110);
    auto* open = new QPushButton("Open text...", this);
    connect(open, &QPushButton::clicked, this, [this] {
        const QString file =
            QFileDialog::getOpenFileName(this, "Open a text", {}, "Text (*.txt *.md);;All files (*)");
        QFile f(file);
        if (!file.isEmpty() && f.open(QIODevice::ReadOnly))
            setInputText(QString::fromUtf8(f.readAll()));
    });
    auto* text_buttons = new QHBoxLayout;
    text_buttons->addWidget(open);
    text_buttons->addWidget(measure_);
    text_buttons->addStretch(1);
    auto* left = new QWidget(this);
    auto* l = new QVBoxLayout(left);
    l->setContentsMargins(0, 0, 0, 0);
    l->addWidget(input_);
    l->addLayout(text_buttons);
    l->addWidget(panes_[Text], 1);
    auto* right = new QWidget(this);
    auto* r = new QVBoxLayout(right);
    r->setContentsMargins(0, 0, 0, 0);
    worst_title_ = new QLabel(this);
    worst_title_->setObjectName("compare_worst_title");
    worst_title_->setWordWrap(true);
    r->addWidget(worst_title_);
    r->addWidget(worst_, 1);
    worst_->setMinimumWidth(220);
    auto* text_split = new QSplitter(Qt::Horizontal, this);
    text_split->setChildrenCollapsible(false);
    text_split->addWidget(left);
    text_split->addWidget(right);
    text_split->setStretchFactor(0, 3);
    text_split->setStretchFactor(1, 1);
    auto* text_page = new QWidget(this);
    auto* t = new QVBoxLayout(text_page);
    t->addWidget(text_split, 1);
    t->addWidget(text_status_);

    modes_->addTab(generate_page, "Generate");
    modes_->addTab(text_page, "Text");
    modes_->addTab(embeddingPage(), "Embeddings");
    enableEmbeddings(); // no run, no model yet: not an encoder's
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(note);
    layout->addLayout(top);
    layout->addWidget(modes_, 1);
    setRuns({}, -1);

    auto generate = [this] {
        if (!generating_)
            emit generateRequested();
    };
    connect(generate_, &QPushButton::clicked, this, generate);
    connect(prompt_, &QLineEdit::returnPressed, this, generate);
    connect(stop_, &QPushButton::clicked, this, &CompareView::stopRequested);
    connect(measure_, &QPushButton::clicked, this, &CompareView::measureRequested);
    connect(embed_, &QPushButton::clicked, this, &CompareView::embedRequested);
    connect(runs_, &QComboBox::currentIndexChanged, this, &CompareView::dropStaleViews);
    connect(worst_, &QListWidget::itemClicked, this,
            [this](QListWidgetItem* item) { chooseWorst(worst_->row(item)); });
}

QWidget* CompareView::embeddingPage()
{
    sentences_ = new QPlainTextEdit(this);
    sentences_->setObjectName("compare_sentences");
    sentences_->setPlaceholderText("Sentences, one per line (or ending in '.', '!' or '?')");
    sentences_->setPlainText("A man is playing a guitar.\nA woman is slicing an onion.\nSomeone plays an "
                             "instrument.\nA cat sleeps on the sofa.\nA chef cuts vegetables.\nThe "
                             "kitten is resting on a couch.");
    sentences_->setMaximumHeight(110);
    embed_ = new QPushButton("Compare embeddings", this);
    embed_->setToolTip("Embed every sentence with the original and the compressed model (the model's own "
                       "pooling, as embedlab-cli embed): the cosine between the two embeddings of each, and "
                       "its nearest other sentences under each model");
    embedding_title_ = new QLabel(this);
    embedding_title_->setObjectName("compare_embedding_title");
    embedding_title_->setWordWrap(true);
    embedding_table_ = new QTableWidget(0, 4, this);
    embedding_table_->setObjectName("compare_embeddings");
    embedding_table_->setHorizontalHeaderLabels(
        {"sentence", "cosine (original, compressed)", "nearest (original)", "nearest (compressed)"});
    embedding_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    embedding_table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
    embedding_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    embedding_table_->verticalHeader()->hide(); // the sentence is the row's name
    embedding_table_->setWordWrap(true);
    embedding_status_ = new QLabel(this);
    embedding_status_->setWordWrap(true);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(embed_);
    buttons->addStretch(1);
    auto* page = new QWidget(this);
    auto* v = new QVBoxLayout(page);
    v->addWidget(sentences_);
    v->addLayout(buttons);
    v->addWidget(embedding_title_);
    v->addWidget(embedding_table_, 1);
    v->addWidget(embedding_status_);
    return page;
}

bool CompareView::encoderChosen() const
{
    const int i = runs_->currentIndex();
    return i >= 0 && i < encoders_.size() && encoders_[i];
}

QString CompareView::sentencesText() const
{
    return sentences_->toPlainText();
}

void CompareView::setSentencesText(const QString& text)
{
    sentences_->setPlainText(text);
}

int CompareView::mode() const
{
    return modes_->currentIndex();
}

void CompareView::setEmbeddingData(const CompareEmbeddingData& data, const QString& status)
{
    if (!data.run.isEmpty() && !runs_->currentText().isEmpty() && data.run != runs_->currentText()) {
        embedding_status_->setText("Not shown: the embeddings were for " + data.run + ", and " +
                                   runs_->currentText() + " is chosen now: press Compare embeddings.");
        return;
    }
    embedding_run_ = data.run;
    embedding_title_->setText(QString("<b>%1</b> against its original: %2 pooling; mean cosine %3; "
                                      "nearest-%4 agreement %5")
                                  .arg(data.run.toHtmlEscaped(), data.pooling)
                                  .arg(data.mean_cosine, 0, 'f', 4)
                                  .arg(data.k)
                                  .arg(data.agreement, 0, 'f', 3));
    const auto neighbours = [&](const QVector<int>& ids, const QVector<double>& sims) {
        QStringList parts;
        for (int j = 0; j < ids.size(); ++j)
            if (ids[j] >= 0 && ids[j] < data.sentences.size())
                parts << QString("%1 (%2)").arg(data.sentences[ids[j]].text).arg(sims.value(j), 0, 'f', 3);
        return parts.join("\n");
    };
    embedding_table_->setRowCount(static_cast<int>(data.sentences.size()));
    for (int i = 0; i < data.sentences.size(); ++i) {
        const auto& s = data.sentences[i];
        auto* cosine = new QTableWidgetItem(QString::number(s.cosine, 'f', 4));
        cosine->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        auto* after = new QTableWidgetItem(neighbours(s.neighbours_compressed, s.similarity_compressed));
        if (s.neighbours_compressed.value(0, -1) != s.neighbours_original.value(0, -1)) {
            after->setBackground(QColor(254, 224, 139)); // the nearest sentence changed
            after->setToolTip("The nearest sentence differs from the original model's");
        }
        embedding_table_->setItem(i, 0, new QTableWidgetItem(s.text));
        embedding_table_->setItem(i, 1, cosine);
        embedding_table_->setItem(
            i, 2, new QTableWidgetItem(neighbours(s.neighbours_original, s.similarity_original)));
        embedding_table_->setItem(i, 3, after);
    }
    embedding_table_->resizeRowsToContents();
    embedding_status_->setText(data.run.isEmpty() ? status : data.run + ": " + status);
}

void CompareView::setRuns(const QStringList& names, int current, const QVector<bool>& encoders)
{
    encoders_ = encoders;
    {
        const QSignalBlocker block(runs_); // one check below, not one per item
        runs_->clear();
        runs_->addItems(names);
        runs_->setCurrentIndex(names.isEmpty() ? -1
                                               : std::clamp(current, 0, static_cast<int>(names.size()) - 1));
        runs_->setPlaceholderText("no compressed run yet: run one on the Results tab");
    }
    dropStaleViews();
}

void CompareView::dropStaleViews()
{
    // Issue 61 item 3: never one run's numbers under another run's name. (With no run
    // listed the shown views keep theirs: they name it.)
    const QString chosen = runs_->currentText();
    const bool encoder = encoderChosen();
    const QString cannot = encoder ? chosen + " is an encoder: it cannot generate nor predict a next token; "
                                              "the Embeddings page compares its sentence embeddings"
                                   : QString();
    modes_->setTabToolTip(0, cannot);
    modes_->setTabToolTip(1, cannot);
    enableEmbeddings();
    if (encoder && modes_->currentIndex() != 2)
        modes_->setCurrentIndex(2); // what applies to it
    worst_title_->setText(text_run_.isEmpty() || text_run_ != chosen
                              ? QString("Worst 20 predictions (click: show in the LLE neighbours tab)")
                              : "Worst 20 predictions of " + text_run_ +
                                    " (click: show in the LLE neighbours tab)");
    if (chosen.isEmpty())
        return;
    if (!embedding_run_.isEmpty() && embedding_run_ != chosen) {
        embedding_table_->setRowCount(0);
        embedding_title_->clear();
        embedding_status_->setText("The embeddings were for " + embedding_run_ +
                                   ": press Compare embeddings to embed the sentences with " + chosen + ".");
        embedding_run_.clear();
    }
    if (!text_run_.isEmpty() && text_run_ != chosen) {
        clearPane(Text);
        worst_->clear();
        text_status_->setText("The colouring was for " + text_run_ +
                              ": press Colour by KL to read the text with " + chosen + ".");
        text_run_.clear();
    }
    if (!generating_ && !generated_run_.isEmpty() && generated_run_ != chosen) {
        for (Pane p : {Original, Compressed})
            clearPane(p);
        titles_[Original]->setText("original");
        titles_[Compressed]->setText("compressed");
        generate_status_->setText("The texts were generated with " + generated_run_ +
                                  ": press Generate to continue the prompt with " + chosen + ".");
        generated_run_.clear();
    }
}

void CompareView::setLoadedModel(const QString& name, bool encoder)
{
    loaded_model_ = name;
    loaded_encoder_ = encoder;
    enableEmbeddings();
}

void CompareView::enableEmbeddings()
{
    // Sentence embeddings are an encoder's: the chosen run's model, or with none listed the
    // loaded one. (A disabled current page gives way to the next enabled one.)
    const bool listed = runs_->currentIndex() >= 0;
    const bool encoder = listed ? encoderChosen() : loaded_encoder_;
    const QString decoder = listed ? runs_->currentText() : loaded_model_;
    modes_->setTabEnabled(kEmbeddingsPage, encoder);
    modes_->setTabToolTip(
        kEmbeddingsPage,
        encoder ? QString()
                : (decoder.isEmpty() ? QString("No encoder loaded") : decoder + " is a decoder") +
                      ": the Embeddings page compares an encoder's sentence embeddings before and after "
                      "compression; Generate and Text compare a decoder's predictions");
}

int CompareView::currentRun() const
{
    return runs_->currentIndex();
}

CompareOptions CompareView::options() const
{
    return {prompt_->text(), max_tokens_->value(), temperature_->value(), seed_->value()};
}

QLabel* CompareView::status() const
{
    const int mode = modes_->currentIndex();
    return mode == 0 ? generate_status_ : mode == 1 ? text_status_ : embedding_status_;
}

void CompareView::setStatus(const QString& status)
{
    this->status()->setText(status);
}

void CompareView::showMode(int mode)
{
    modes_->setCurrentIndex(mode);
}

void CompareView::clearPane(Pane pane)
{
    panes_[pane]->clear();
    tokens_[pane].clear();
    positions_[pane].clear();
}

void CompareView::startGeneration(const QString& original_name, const QString& compressed_name)
{
    QTextCharFormat prompt;
    prompt.setForeground(QColor(110, 110, 110));
    for (Pane p : {Original, Compressed}) {
        clearPane(p);
        QTextCursor(panes_[p]->document()).insertText(prompt_->text(), prompt);
    }
    titles_[Original]->setText("<b>original</b> " + original_name.toHtmlEscaped());
    titles_[Compressed]->setText("<b>compressed</b> " + compressed_name.toHtmlEscaped());
    generated_run_ = compressed_name;
    generating_ = true;
    generate_->setEnabled(false);
    stop_->setEnabled(true);
    generate_status_->setText("Generating ...");
}

void CompareView::appendToken(Pane pane, const CompareToken& token)
{
    tokens_[pane].push_back(token);
    if (token.text.isEmpty()) {
        positions_[pane].push_back(-1);
        return;
    }
    QTextCursor cursor(panes_[pane]->document());
    cursor.movePosition(QTextCursor::End);
    positions_[pane].push_back(cursor.position());
    QTextCharFormat format;
    format.setForeground(palette().color(QPalette::Text)); // not the prompt's grey
    if (const QColor c = klColour(token.kl); c.isValid())
        format.setBackground(c);
    cursor.insertText(token.text, format);
    if (generating_)
        panes_[pane]->verticalScrollBar()->setValue(panes_[pane]->verticalScrollBar()->maximum());
}

void CompareView::finishGeneration(const QString& status)
{
    generating_ = false;
    generate_->setEnabled(true);
    stop_->setEnabled(false);
    generate_status_->setText(status);
    dropStaleViews(); // the run was changed while it generated
}

QString CompareView::inputText() const
{
    return input_->toPlainText();
}

void CompareView::setInputText(const QString& text)
{
    input_->setPlainText(text);
}

void CompareView::setTextData(const CompareTextData& data, const QString& status)
{
    if (!data.run.isEmpty() && !runs_->currentText().isEmpty() &&
        data.run != runs_->currentText()) { // chosen another while it ran
        text_status_->setText("Not shown: the colouring was for " + data.run + ", and " +
                              runs_->currentText() + " is chosen now: press Colour by KL.");
        return;
    }
    text_run_ = data.run;
    worst_title_->setText(data.run.isEmpty()
                              ? QString("Worst 20 predictions (click: show in the LLE neighbours tab)")
                              : "Worst 20 predictions of " + data.run +
                                    " (click: show in the LLE neighbours tab)");
    clearPane(Text);
    for (const auto& t : data.tokens)
        appendToken(Text, t);
    worst_->clear();
    for (int rank = 0; rank < data.worst.size(); ++rank) {
        const int at = data.worst[rank];
        if (at < 0 || at >= data.tokens.size())
            continue;
        const auto& t = data.tokens[at];
        auto* item = new QListWidgetItem(QString("%1. %2  KL %3 nats (token %4 at %5)")
                                             .arg(rank + 1)
                                             .arg(escaped_token(t.piece))
                                             .arg(t.kl, 0, 'g', 3)
                                             .arg(t.id)
                                             .arg(at),
                                         worst_);
        item->setData(Qt::UserRole, t.id);
        item->setData(Qt::UserRole + 1, at);
        item->setBackground(klColour(t.kl));
    }
    text_status_->setText(data.run.isEmpty() ? status : data.run + ": " + status);
}

void CompareView::chooseWorst(int row)
{
    auto* item = worst_->item(row);
    if (!item)
        return;
    const int at = item->data(Qt::UserRole + 1).toInt();
    if (const int p = tokenPosition(Text, at); p >= 0) { // the token in view, selected
        QTextCursor cursor(panes_[Text]->document());
        cursor.setPosition(p);
        cursor.setPosition(p + static_cast<int>(tokens_[Text][at].text.size()), QTextCursor::KeepAnchor);
        panes_[Text]->setTextCursor(cursor);
        panes_[Text]->ensureCursorVisible();
    }
    emit tokenChosen(item->data(Qt::UserRole).toInt());
}

int CompareView::tokenPosition(Pane pane, int index) const
{
    return index >= 0 && index < positions_[pane].size() ? positions_[pane][index] : -1;
}

QRect CompareView::tokenRect(Pane pane, int index) const
{
    const int p = tokenPosition(pane, index);
    if (p < 0)
        return {};
    QTextCursor cursor(panes_[pane]->document());
    cursor.setPosition(p);
    const QRect at = panes_[pane]->cursorRect(cursor);
    return {at.topLeft(), QSize(panes_[pane]->fontMetrics().averageCharWidth(), at.height())};
}

int CompareView::tokenAt(Pane pane, const QPoint& pixel) const
{
    const QTextEdit* edit = panes_[pane];
    const QPoint in_document(pixel.x() + edit->horizontalScrollBar()->value(),
                             pixel.y() + edit->verticalScrollBar()->value());
    const int at = edit->document()->documentLayout()->hitTest(in_document, Qt::ExactHit);
    if (at < 0)
        return -1;
    int found = -1;
    for (int i = 0; i < positions_[pane].size(); ++i)
        if (positions_[pane][i] >= 0) {
            if (positions_[pane][i] > at)
                break;
            found = i;
        }
    return found;
}

QString CompareView::hoverText(Pane pane, int index) const
{
    if (index < 0 || index >= tokens_[pane].size())
        return {};
    const auto& t = tokens_[pane][index];
    QString html = QString("<b>%1</b> (token %2)").arg(escaped_token(t.piece).toHtmlEscaped()).arg(t.id);
    if (!std::isnan(t.kl))
        html += QString(", KL(original || compressed) %1 nats").arg(t.kl, 0, 'g', 3);
    const bool original = pane == Original;
    const QVector<CompareToken::Alternative>* columns[2] = {&t.top, &t.original_top};
    const QString heads[2] = {original ? "original top-5" : "compressed top-5", "original top-5"};
    html += "<table cellspacing=4><tr>";
    for (int c = 0; c < 2; ++c)
        if (!columns[c]->isEmpty())
            html += "<th align=left>" + heads[c] + "</th><th></th>";
    html += "</tr>";
    for (int row = 0; row < std::max(t.top.size(), t.original_top.size()); ++row) {
        html += "<tr>";
        for (int c = 0; c < 2; ++c)
            if (!columns[c]->isEmpty()) {
                const auto* a = row < columns[c]->size() ? &(*columns[c])[row] : nullptr;
                html += a ? QString("<td>%1</td><td align=right>%2</td>")
                                .arg(escaped_token(a->piece).toHtmlEscaped(), percent(a->probability))
                          : QString("<td></td><td></td>");
            }
        html += "</tr>";
    }
    return html + "</table>";
}

bool CompareView::eventFilter(QObject* watched, QEvent* event)
{
    if (event->type() == QEvent::ToolTip)
        for (Pane p : {Original, Compressed, Text})
            if (watched == panes_[p]->viewport()) {
                auto* help = static_cast<QHelpEvent*>(event);
                const QString text = hoverText(p, tokenAt(p, help->pos()));
                if (text.isEmpty())
                    QToolTip::hideText();
                else
                    QToolTip::showText(help->globalPos(), text, panes_[p]->viewport());
                return true;
            }
    return QWidget::eventFilter(watched, event);
}

} // namespace embedlab::views
