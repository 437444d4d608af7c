// The LLE neighbour graph (METHODS 2): every token on the embedding's first two
// principal components, common tokens grey and rare ones coloured by how well
// LLE rebuilds them; clicking (or searching) a rare token draws edges to its k
// common neighbours, width by LLE weight, with labels. Right: histogram of the
// rare rows' reconstruction cosines. Points are a handful of scatter graphs
// (no per-point items), so 50k tokens stay interactive.
#pragma once

#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPAxisRect;
class QCPBars;
class QLabel;
class QLineEdit;
class QMouseEvent;

namespace embedlab::views {

struct NeighbourGraphData {
    QString label;
    QVector<double> x, y;      // all V tokens, PC 1 and PC 2
    QVector<int> common, rare; // token ids
    int k = 0;
    QVector<int> neighbours;   // [rare.size(), k] common ids, best first
    QVector<double> weights;   // [rare.size(), k] LLE weights (sum to 1 per row)
    QVector<double> cosine;    // per rare token: rebuilt vs original
    QVector<double> histogram; // counts of `cosine` in equal bins over [hist_lo, 1]
    double hist_lo = 0;
    QStringList tokens; // V texts (may be empty)
};

class NeighbourGraphView : public QWidget {
    Q_OBJECT
public:
    explicit NeighbourGraphView(QWidget* parent = nullptr);
    void setData(const NeighbourGraphData& data);
    const NeighbourGraphData& data() const { return data_; }
    QCustomPlot* plot() const { return plot_; }
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    QCPAxisRect* histogramRect() const { return hist_rect_; }
    int selectedToken() const { return selected_; } // token id, -1: none
    QString summary() const;
    // The rare token nearest to a pixel position of the scatter (-1 if none within `radius` px).
    int rareTokenAt(const QPointF& pixel, double radius = 12) const;

public slots:
    bool selectToken(int id);         // false (and no change) unless id is rare
    bool search(const QString& text); // a token id or a rare token's exact text

signals:
    void tokenSelected(int id);

private:
    void clicked(QMouseEvent* event);
    void drawSelection();

    QCustomPlot* plot_;
    QCPAxisRect* hist_rect_;
    QCPBars* hist_;
    QLineEdit* search_;
    QLabel* stats_;
    NeighbourGraphData data_;
    QVector<int> rare_slot_; // token id -> index into rare, -1 for common
    QPointF press_;          // where the mouse went down: a click is a release near it
    int selected_ = -1;
};

} // namespace embedlab::views
