// The Compare tab: a compressed model's text beside its original's. Two modes:
// Generate (a prompt continued by both models side by side, each compressed token
// on a background coloured by the KL between the two models at that step) and
// Text (every token of a pasted or opened text coloured by KL(P_original ||
// P_compressed) of its prediction, the worst listed; clicking one asks for it in
// the neighbour graph). Hovering a token shows both models' top-5. A third mode,
// Embeddings, is an encoder's (it cannot generate): each sentence's cosine between its
// embeddings before and after, and its nearest other sentences under both models. Fed
// plain structs; the view only lays them out and maps KL to colour.
#pragma once

#include <QColor>
#include <QPoint>
#include <QRect>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;
class QTextEdit;

namespace embedlab::views {

struct CompareToken {
    int id = -1;
    QString text; // what it adds to the text ("" mid-character: drawn with the next)
    QString piece;
    double kl = qQNaN(); // nats; NaN: not compared (the original's column, a text's first token)
    struct Alternative {
        QString piece;
        double probability = 0;
    };
    QVector<Alternative> top, original_top; // the model's own; the original's at the same prefix
};

struct CompareTextData {
    QString run; // the compressed run it was computed for, as the run box names it
    QVector<CompareToken> tokens;
    QVector<int> worst; // token positions, largest KL first
    int total_tokens = 0;
};

// An encoder's run (issue 61 item 6): each sentence's embedding before and after.
struct CompareSentence {
    QString text;
    double cosine = 0;                                          // original against compressed
    QVector<int> neighbours_original, neighbours_compressed;    // nearest other sentences, nearest first
    QVector<double> similarity_original, similarity_compressed; // their cosines
};
struct CompareEmbeddingData {
    QString run; // as the run box names it
    QVector<CompareSentence> sentences;
    QString pooling;
    double mean_cosine = 0, agreement = 0; // agreement: shared neighbours at k, averaged
    int k = 0;
};

struct CompareOptions {
    QString prompt;
    int max_tokens = 48;
    double temperature = 0;
    int seed = 0;
};

class CompareView : public QWidget {
    Q_OBJECT
public:
    enum Pane { Original = 0, Compressed = 1, Text = 2 }; // the three token panes
    explicit CompareView(QWidget* parent = nullptr);

    // The background of a token whose prediction diverged by `kl` nats: pale
    // below 0.001, yellow at 0.03, red from 1 up (log scale); none for NaN.
    static QColor klColour(double kl);

    // The results rows that can be compared ("" entries are not offered). A computed
    // view (generated columns, the text's colouring and worst list) names its run; when
    // the chosen run is another one, it is cleared and the status says what to press.
    // `encoders`: which runs are an encoder's (it cannot generate nor predict a next token:
    // choosing one shows the Embeddings page, and Generate and Colour by KL say so).
    void setRuns(const QStringList& names, int current, const QVector<bool>& encoders = {});
    bool encoderChosen() const; // the chosen run is an encoder's
    // The loaded model (its file name) and whether it is an encoder: with no run listed, a
    // decoder has the Embeddings page disabled, as a decoder's chosen run has.
    void setLoadedModel(const QString& name, bool encoder);
    int currentRun() const; // index into the names, -1: none
    CompareOptions options() const;

    // Generate mode: cleared and Stop enabled, then tokens as they come, then done.
    void startGeneration(const QString& original_name, const QString& compressed_name);
    QString generatedRun() const { return generated_run_; } // "" : nothing generated shown
    void appendToken(Pane pane, const CompareToken& token);
    void finishGeneration(const QString& status);
    bool generating() const { return generating_; }

    // Text mode.
    QString inputText() const;
    void setInputText(const QString& text);
    // Shown with the run named, unless data.run is no longer the chosen run (dropped, said).
    void setTextData(const CompareTextData& data, const QString& status);
    QString textRun() const { return text_run_; } // the run the colouring is for ("": none)
    void setStatus(const QString& status);        // the shown mode's status line

    // Embeddings mode: the sentences of a text embedded before and after compression.
    QString sentencesText() const;
    void setSentencesText(const QString& text);
    void setEmbeddingData(const CompareEmbeddingData& data, const QString& status);
    QString embeddingRun() const { return embedding_run_; } // "": none shown

    void showMode(int mode); // 0: generate, 1: text, 2: embeddings
    int mode() const;
    int tokenCount(Pane pane) const { return static_cast<int>(tokens_[pane].size()); }
    const CompareToken& token(Pane pane, int index) const { return tokens_[pane][index]; }
    int tokenPosition(Pane pane, int index) const;              // its first character in the pane's document
    QRect tokenRect(Pane pane, int index) const;                // its first character, viewport pixels
    int tokenAt(Pane pane, const QPoint& viewport_pixel) const; // -1: none
    QString hoverText(Pane pane, int index) const;              // both top-5 (HTML)

    QTextEdit* pane(Pane p) const { return panes_[p]; }
    QLineEdit* prompt() const { return prompt_; }
    QSpinBox* maxTokens() const { return max_tokens_; }
    QDoubleSpinBox* temperature() const { return temperature_; }
    QSpinBox* seed() const { return seed_; }
    QPushButton* generateButton() const { return generate_; }
    QPushButton* stopButton() const { return stop_; }
    QPushButton* measureButton() const { return measure_; }
    QComboBox* runBox() const { return runs_; }
    QListWidget* worstList() const { return worst_; }
    QLabel* worstTitle() const { return worst_title_; } // names the run the list is for
    QPushButton* embedButton() const { return embed_; }
    QTableWidget* embeddingTable() const { return embedding_table_; }
    QLabel* embeddingTitle() const { return embedding_title_; }
    QLabel* status() const;

signals:
    void generateRequested();
    void stopRequested();
    void measureRequested();
    void embedRequested();
    void openTextRequested();
    void tokenChosen(int id); // a worst-list entry clicked: its token id

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    QWidget* embeddingPage(); // built once, by the constructor
    void clearPane(Pane pane);
    void chooseWorst(int row);
    void dropStaleViews();   // what was computed for a run no longer chosen
    void enableEmbeddings(); // the Embeddings page only for an encoder (its tooltip says why not)

    QTabWidget* modes_;
    QComboBox* runs_;
    QLineEdit* prompt_;
    QSpinBox* max_tokens_;
    QDoubleSpinBox* temperature_;
    QSpinBox* seed_;
    QPushButton* generate_;
    QPushButton* stop_;
    QLabel* titles_[2];
    QLabel* generate_status_;
    QPlainTextEdit* input_;
    QPushButton* measure_;
    QListWidget* worst_;
    QLabel* text_status_;
    QLabel* worst_title_;
    QPlainTextEdit* sentences_;
    QPushButton* embed_;
    QLabel* embedding_title_;
    QTableWidget* embedding_table_;
    QLabel* embedding_status_;
    QVector<bool> encoders_; // per listed run
    QString loaded_model_;   // the loaded model's file name ("": none)
    bool loaded_encoder_ = false;
    QString embedding_run_;
    QTextEdit* panes_[3];
    QVector<CompareToken> tokens_[3];
    QVector<int> positions_[3]; // each token's first character; -1 when it added none
    bool generating_ = false;
    QString generated_run_, text_run_; // the runs the shown columns and colouring were computed for
};

} // namespace embedlab::views
